"""Tables of TI figures next to their nulls, as the analysis report and the demo show them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tisa.analysis.training_report import format_z
from tisa.reports.html import Table

if TYPE_CHECKING:
    from tisa.analysis.nulls import NullBaselines
    from tisa.analysis.results import ModelAnalysis

__all__ = ["NULL_COLUMNS", "draws_text", "model_nulls", "null_row", "null_table"]

#: Columns of a table of figures next to their nulls (:func:`null_row`).
NULL_COLUMNS: tuple[str, ...] = (
    "figure",
    "observed",
    "random null (mean ± std)",
    "z (random)",
    "shuffled null (mean ± std)",
    "z (shuffled)",
    "draws exceeded",
)

def null_row(label: str, b: NullBaselines, *, digits: int = 3) -> list[Any]:
    """One row of :data:`NULL_COLUMNS` for a figure and its nulls."""
    exceeded = min(b.random.exceeded, b.shuffled.exceeded)
    return [
        label,
        b.observed,
        f"{b.random.mean:.{digits}f} ± {b.random.std:.{digits}f}",
        format_z(b.random.z),
        f"{b.shuffled.mean:.{digits}f} ± {b.shuffled.std:.{digits}f}",
        format_z(b.shuffled.z),
        f"{100 * exceeded:.0f}% of {len(b.random.draws) + len(b.shuffled.draws)}",
    ]


def null_table(
    rows: Sequence[tuple[str, NullBaselines]], *, caption: str = "", notes: str = ""
) -> Table:
    """A :class:`~tisa.reports.html.Table` of figures next to their nulls."""
    return Table(
        list(NULL_COLUMNS),
        [null_row(label, b) for label, b in rows],
        caption=caption,
        notes=notes,
        shade=[1],
    )


def model_nulls(m: ModelAnalysis) -> dict[str, list[tuple[str, NullBaselines]]]:
    """Every figure of one model that has nulls, as (label, NullBaselines), grouped as
    the report shows them: ``"positions"`` (P Pᵀ, cos(P)), ``"layer1"`` (F_P) and
    ``"probes"``; groups without nulls are left out."""
    groups: dict[str, list[tuple[str, NullBaselines]]] = {}
    pe, l1 = m.position_embeddings, m.layer1
    if pe is not None and pe.nulls is not None:
        labels = {
            "ti_gram": "TI P Pᵀ",
            "ti_gram_offdiag": "TI P Pᵀ off-diagonal",
            "ti_cosine": "TI cos(P)",
            "ti_cosine_offdiag": "TI cos(P) off-diagonal",
        }
        groups["positions"] = [(label, pe.nulls[key]) for key, label in labels.items()]
    if l1 is not None and l1.raw.nulls is not None and l1.ln.nulls is not None:
        groups["layer1"] = [
            row
            for variant, terms in (("raw", l1.raw), ("LN", l1.ln))
            for row in (
                (f"TI F_P {variant}, mean over heads", terms.nulls["ti_mean"]),
                (f"TI F_P {variant} off-diagonal, mean", terms.nulls["ti_offdiag_mean"]),
            )
        ]
    probes = []
    for key, label in (("repeated", "repeated token"), ("sentences", "sentences")):
        probe = None if m.probes is None else m.probes.get(key)
        if probe is not None and probe.nulls is not None:
            probes.append((f"probe TI off-diagonal, {label}", probe.nulls.mean["ti_offdiag"]))
            probes.append((f"probe TI, {label}", probe.nulls.mean["ti"]))
    if probes:
        groups["probes"] = probes
    return groups


def draws_text(b: NullBaselines) -> str:
    """How many draws each null of ``b`` has, and their seed, for a caption."""
    return f"{len(b.random.draws)} draws per null, seed {b.random.seed}"
