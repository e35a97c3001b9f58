"""Comparing position schemes in pretraining (``experiments/position_schemes.py``): the runs
of a comparison (:class:`RunSpec`, parsed from ``LABEL=SCHEME:KEY=VALUE:...``), the runs of
an equal-tuning sweep of the positional learning rate and its choice, the extrapolation
targets each run is checked against, and the comparison over seeds
(:func:`seed_comparison`: mean and sd per run and length, paired differences against the
best baseline with Holm's correction).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any

from tisa.hf.settings import takes_num_kernels
from tisa.pretrain.config import PretrainConfig, parse_options
from tisa.pretrain.schemes import scoring_family
from tisa.scoring import build

__all__ = [
    "DEFAULT_POSITIONS",
    "DEFAULT_VARIANTS",
    "MUST_MATCH",
    "BASELINE_SCHEMES",
    "RunSpec",
    "fmt",
    "has_positional_parameters",
    "losses",
    "parse_spec",
    "seed_comparison",
    "seed_markdown",
    "select_rates",
    "shown",
    "sweep_markdown",
    "sweep_specs",
    "targets",
]


DEFAULT_POSITIONS = (
    "absolute",
    "none",
    "tisa",
    "absolute+tisa",
    "alibi",
    "t5",
    "kerple_log",
    "rbf_log",
    "rbf_linear",
    "rbf_linear-fixed=rbf_linear:learn_tail=false",
    "rbf_logdist",
)


DEFAULT_VARIANTS = ("tisa-far127=tisa:far_offset=127",)

#: schemes that are baselines of the comparison, not the project's kernel families
BASELINE_SCHEMES = ("absolute", "none", "alibi", "alibi_learned", "t5", "kerple_log", "rope",
                    "fire")


#: Settings a finished run must share with the request to be reused.
MUST_MATCH = (
    "position",
    "arch",
    "max_steps",
    "seq_len",
    "batch_size",
    "seed",
    "bf16",
    "tisa_learning_rate",
    "scoring_options",
    "num_kernels",
    "mixed_lengths",
    "mixed_share",
    "size",
)


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run of the comparison: its label (folder name), scheme, settings, options."""

    label: str
    position: str
    settings: dict[str, Any]
    scoring_options: tuple[str, ...]


def parse_spec(text: str) -> RunSpec:
    """``LABEL=SCHEME:KEY=VALUE:...`` (or a bare scheme) -> :class:`RunSpec`.

    Raises:
        ValueError: an empty label or scheme, or a malformed KEY=VALUE.
    """
    head, *items = text.split(":")
    label, sep, position = head.partition("=")
    if not sep:
        label = position = head
    if not label or not position or "/" in label:
        raise ValueError(f"--positions: expected LABEL=SCHEME[:KEY=VALUE...], got {text!r}")
    hints = typing.get_type_hints(PretrainConfig)
    fields = {f.name for f in dataclasses.fields(PretrainConfig)}
    settings: dict[str, Any] = {}
    scoring: list[str] = []
    for key, value in parse_options(items, f"--positions {label}").items():
        if key in fields:
            if typing.get_origin(hints[key]) is tuple or "tuple" in str(hints[key]):
                parts = str(value).split(",")
                value = tuple(int(p) if p.strip().isdigit() else p for p in parts)
            settings[key] = value
        else:
            raw = next(i for i in items if i.partition("=")[0].strip() == key)
            scoring.append(raw)
    return RunSpec(label, position, settings, tuple(scoring))


def has_positional_parameters(spec: RunSpec) -> bool:
    """Whether the run's scheme has learned positional scoring parameters.

    Raises:
        ValueError: an unknown scheme or a scoring option its family does not take.
    """
    family = scoring_family(spec.position)
    if family is None:
        return False
    options = parse_options(spec.scoring_options, f"--positions {spec.label}")
    if takes_num_kernels(family):
        options.setdefault("num_kernels", spec.settings.get("num_kernels", 5))
    return build(family, num_heads=2, **options).num_positional_parameters() > 0


def sweep_specs(
    specs: list[RunSpec], rates: list[float], tisa_learning_rate: float | None
) -> tuple[list[RunSpec], dict[str, dict[float, str]]]:
    """The runs of a positional learning-rate sweep.

    Returns:
        (runs to train, {sweep label: {rate: run label}}): a run with learned positional
        parameters becomes one run per rate (``LABEL-plrRATE``, ``tisa_learning_rate`` set);
        the others stay as they are.

    Raises:
        ValueError: no rates, a rate that is not positive or given twice, a global
            ``--tisa-learning-rate``, or a run that fixes its own ``tisa_learning_rate``.
    """
    if not rates or any(not r > 0 for r in rates) or len(set(rates)) != len(rates):
        raise ValueError(f"--positional-lr-sweep: distinct rates > 0 expected, got {rates}")
    if tisa_learning_rate is not None:
        raise ValueError("--positional-lr-sweep chooses the rate: leave out --tisa-learning-rate")
    out: list[RunSpec] = []
    plan: dict[str, dict[float, str]] = {}
    for spec in specs:
        if not has_positional_parameters(spec):
            out.append(spec)
            continue
        if "tisa_learning_rate" in spec.settings:
            raise ValueError(
                f"--positions {spec.label}: its tisa_learning_rate is what the sweep chooses"
            )
        plan[spec.label] = {}
        for rate in rates:
            label = f"{spec.label}-plr{rate:g}"
            settings = dict(spec.settings, tisa_learning_rate=rate)
            out.append(RunSpec(label, spec.position, settings, spec.scoring_options))
            plan[spec.label][rate] = label
    return out, plan


def _spec_text(spec: RunSpec, rate: float) -> str:
    items = [
        f"{k}={_setting_text(v)}" for k, v in spec.settings.items() if k != "tisa_learning_rate"
    ]
    items += list(spec.scoring_options) + [f"tisa_learning_rate={rate:g}"]
    return ":".join([f"{spec.label}={spec.position}", *items])


def _setting_text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def select_rates(
    runs: dict[str, Path], plan: dict[str, dict[float, str]], specs: list[RunSpec]
) -> dict[str, Any]:
    """The positional rate of each swept run: the lowest final validation loss.

    Validation is at the training length (``eval_loss`` in each run's results.json);
    ties go to the smaller rate.

    Returns:
        ``{"rates": [...], "runs": {label: {"position", "candidates": {rate: loss},
        "chosen", "chosen_run", "spec"}}, "fixed": {label: loss}}`` (``fixed``: the runs
        without positional parameters, trained once).
    """
    by_label = {s.label: s for s in specs}
    swept = {label for rates in plan.values() for label in rates.values()}

    def loss(label: str) -> float | None:
        done = json.loads((runs[label] / "results.json").read_text())
        value = done.get("eval_loss")
        return None if value is None else float(value)

    out: dict[str, Any] = {"rates": sorted({r for v in plan.values() for r in v}), "runs": {}}
    for base, rates in plan.items():
        candidates = {rate: loss(label) for rate, label in sorted(rates.items())}
        scored = [(v, r) for r, v in candidates.items() if v is not None]
        chosen = min(scored)[1] if scored else None
        spec = by_label[rates[chosen]] if chosen is not None else None
        out["runs"][base] = {
            "position": by_label[next(iter(rates.values()))].position,
            "candidates": {f"{r:g}": v for r, v in candidates.items()},
            "chosen": chosen,
            "chosen_run": None if chosen is None else rates[chosen],
            "spec": None
            if spec is None
            else _spec_text(dataclasses.replace(spec, label=base), chosen),
        }
    out["fixed"] = {label: loss(label) for label in runs if label not in swept}
    return out


def sweep_markdown(selection: dict[str, Any]) -> str:
    rates = [f"{r:g}" for r in selection["rates"]]
    lines = [
        "Positional learning rate per run: validation loss at the training length "
        "(end of training) at each rate; the lowest is chosen.",
        "",
        "| run | position | " + " | ".join(rates) + " | chosen |",
        "|---|---|" + "---:|" * len(rates) + "---:|",
    ]
    for label, r in selection["runs"].items():
        cells = [fmt(r["candidates"].get(rate)) for rate in rates]
        chosen = "" if r["chosen"] is None else f"{r['chosen']:g}"
        lines.append(f"| {label} | {r['position']} | " + " | ".join(cells) + f" | {chosen} |")
    if selection["fixed"]:
        lines += ["", "Without positional parameters (trained once):", ""]
        lines += [f"- {label}: {fmt(v)}" for label, v in selection["fixed"].items()]
    specs = [r["spec"] for r in selection["runs"].values() if r["spec"]]
    if specs:
        lines += ["", "The chosen runs, as `--positions` specs:", "", "    " + " ".join(specs)]
    return "\n".join(lines) + "\n"


def shown(path: Path) -> str:
    """``path`` as a summary records it: relative to the working folder when inside it (a
    summary committed with its results names no machine's folders), else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def losses(results, label: str, lengths: list[int]) -> dict[int, float | None]:
    rows = {n: results.row(label, n) for n in lengths}
    return {n: r.loss if r.status == "ok" else None for n, r in rows.items()}


def targets(runs: dict[str, dict], lengths: list[int]) -> dict[str, dict[str, Any]]:
    """The extrapolation targets per run: within 3% of its own training-length loss at 8x and 5%
    at 16x, at or below ALiBi at every length, at or below the RBF scorer (``tisa``) at the
    training length, under 1% of the absolute table's positional parameters."""
    first = lengths[0]
    alibi = (runs.get("alibi") or {}).get("test_loss", {})
    rbf = (runs.get("tisa") or {}).get("test_loss", {}).get(first)
    table = ((runs.get("absolute") or {}).get("positional_parameters") or {}).get("total")
    out = {}
    for label, r in runs.items():
        loss = r["test_loss"]
        if loss.get(first) is None:
            continue

        def rise(n: int) -> float | None:
            return None if loss.get(n) is None else loss[n] / loss[first] - 1.0

        checks: dict[str, Any] = {
            "rise_8x": rise(first * 8),
            "rise_16x": rise(first * 16),
        }
        checks["within_3pct_8x"] = checks["rise_8x"] is not None and checks["rise_8x"] <= 0.03
        checks["within_5pct_16x"] = checks["rise_16x"] is not None and checks["rise_16x"] <= 0.05
        checks["at_or_below_alibi"] = bool(alibi) and all(
            loss.get(n) is not None and alibi.get(n) is not None and loss[n] <= alibi[n]
            for n in lengths
        )
        checks["at_or_below_rbf_at_train_length"] = rbf is not None and loss[first] <= rbf
        params = r["positional_parameters"]["total"]
        checks["under_1pct_of_table"] = table is not None and params < 0.01 * table
        checks["all"] = all(v for k, v in checks.items() if not k.startswith("rise"))
        out[label] = checks
    return out


def fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def seed_comparison(
    per_seed: dict[int, dict[str, dict[str, Any]]],
    lengths: list[int],
    baselines: list[str],
    *,
    level: float = 0.95,
) -> dict[str, Any]:
    """The runs of several seeds side by side.

    Args:
        per_seed: ``{seed: {label: run}}``, each run as a summary's ``runs`` entry
            (``final_validation_loss``, ``test_loss`` by length).
        lengths: evaluation lengths.
        baselines: the labels that are baselines; every other run is compared with them.
        level: confidence level of the paired intervals.

    Returns:
        ``{"seeds", "runs": {label: {"validation": stats, "test": {length: stats}}},
        "best_baseline": {length: label}, "comparisons": [...]}``, where stats are
        ``{"mean", "sd", "n"}`` over the seeds with a value, and each comparison is a run
        against the baseline with the lowest mean test loss at that length, paired by seed
        (the same seed: the same initialisation seed, data order and masks): the mean
        difference (run - baseline, nats; below zero: the run is better), its t interval,
        p, and p adjusted by Holm over all comparisons. A length is compared only where
        both have a loss at every seed.

    Raises:
        ValueError: fewer than two seeds, or a run missing at some seed.
    """
    import statistics

    from tisa.stats import holm, paired_difference

    seeds = sorted(per_seed)
    if len(seeds) < 2:
        raise ValueError(f"seeds: a comparison over seeds needs at least 2, got {seeds}")
    labels = list(per_seed[seeds[0]])
    for seed in seeds:
        if set(per_seed[seed]) != set(labels):
            raise ValueError(f"seed {seed}: runs {sorted(per_seed[seed])}, expected {labels}")

    def stats(values: list[float | None]) -> dict[str, Any]:
        xs = [v for v in values if v is not None]
        return {
            "mean": statistics.fmean(xs) if xs else None,
            "sd": statistics.stdev(xs) if len(xs) > 1 else None,
            "n": len(xs),
        }

    def test(label: str, n: int) -> list[float | None]:
        return [per_seed[s][label]["test_loss"].get(n) for s in seeds]

    runs = {
        label: {
            "validation": stats([per_seed[s][label]["final_validation_loss"] for s in seeds]),
            "test": {n: stats(test(label, n)) for n in lengths},
        }
        for label in labels
    }
    best: dict[int, str | None] = {}
    for n in lengths:
        present = [b for b in baselines if b in runs and runs[b]["test"][n]["n"] == len(seeds)]
        best[n] = min(present, key=lambda b: runs[b]["test"][n]["mean"]) if present else None
    comparisons = []
    for label in labels:
        if label in baselines:
            continue
        for n in lengths:
            against = best[n]
            a, b = test(label, n), test(against, n) if against else []
            if against is None or None in a or None in b:
                continue
            diff = paired_difference(a, b, level=level)
            comparisons.append({"run": label, "against": against, "length": n,
                                **diff.to_dict()})
    for row, adjusted in zip(comparisons, holm([c["p"] for c in comparisons]), strict=True):
        row["p_holm"] = adjusted
    return {"seeds": seeds, "runs": runs, "best_baseline": best, "comparisons": comparisons}


def seed_markdown(result: dict[str, Any], lengths: list[int], alpha: float = 0.05) -> str:
    """Two tables: mean ± sd over seeds per run, and the paired comparisons."""
    from tisa.reports.markdown import markdown_table

    def cell(st: dict[str, Any]) -> str:
        if st["mean"] is None:
            return "n/a"
        return f"{st['mean']:.3f} ± {st['sd']:.3f}" if st["sd"] is not None else fmt(st["mean"])

    rows = [[label, cell(r["validation"]), *(cell(r["test"][n]) for n in lengths)]
            for label, r in result["runs"].items()]
    out = markdown_table(["run", "val. loss", *(f"test @{n}" for n in lengths)], rows,
                         align="l" + "r" * (len(lengths) + 1))
    out += f"\nMean ± sd over seeds {', '.join(map(str, result['seeds']))} (nats).\n"
    if result["comparisons"]:
        rows = [[c["run"], c["against"], c["length"],
                 f"{c['mean']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]", f"{c['p_holm']:.2g}",
                 "yes" if c["p_holm"] < alpha and c["high"] < 0 else "no"]
                for c in result["comparisons"]]
        out += "\n" + markdown_table(
            ["run", "best baseline", "length", "run - baseline, 95% interval", "p (Holm)",
             f"better after correction (p < {alpha:g})"], rows, align="llrrrl")
        out += (f"\nPaired by seed; Holm over the {len(result['comparisons'])} "
                "comparisons.\n")
    return out
