"""GLUE results over seeds: medians per task and variant, the GLUE average, relative error
reductions, paired comparisons, and the tables (Markdown, CSV).

Relative error reduction against the baseline variant: ``(err_base - err) / err_base``
with ``err = 1 - score`` (every GLUE metric is bounded above by 1). For accuracy and F1
that error is the error rate; for CoLA's MCC and STS-B's correlations, which range from
-1 to 1, it is the distance to a perfect score (0 to 2), so their percentages are not
error rates and do not compare one to one with the accuracy tasks'. Seeds pair up across
variants (the same seed gives the same data order and head initialisation), so
:func:`paired_comparison` compares a variant with the baseline seed by seed.

An undefined score (NaN, e.g. a correlation of constant predictions) is never dropped
from a variant's cell: its median, min and max are NaN ("n/a"), so a failed seed shows.
The paired comparison leaves out the pairs with a NaN and says how many (``undefined``).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tisa.reports.markdown import markdown_table

__all__ = [
    "paired_comparison",
    "paired_rows",
    "parity_comparison",
    "parity_markdown",
    "parity_rows",
    "relative_error_reduction",
    "summarize",
    "summary_csv",
    "summary_markdown",
    "summary_rows",
]


def relative_error_reduction(score: float, baseline_score: float) -> float:
    """``(err_base - err) / err_base`` with ``err = 1 - score`` (scores bounded by 1).

    Positive when ``score`` beats the baseline: 0.05 means 5% of the baseline's error
    is gone. NaN when the baseline has no error.
    """
    err, err_base = 1.0 - score, 1.0 - baseline_score
    if err_base == 0 or math.isnan(err_base) or math.isnan(err):
        return float("nan")
    return (err_base - err) / err_base


def paired_comparison(
    scores: dict[int, float], baseline_scores: dict[int, float]
) -> dict[str, Any]:
    """Compares a variant with the baseline seed by seed (same seed = same data order and
    head initialisation, so the seeds pair up).

    Args:
        scores: seed -> task score of the variant.
        baseline_scores: seed -> task score of the baseline.

    Returns:
        ``seeds`` (paired, both scores defined), ``n``, ``undefined`` (seeds both have but
        with a NaN score on either side, left out), ``mean_diff`` and ``median_diff``
        (variant - baseline), ``ci95`` (a t interval of the mean difference; NaN with
        fewer than 2 pairs), ``wins`` / ``losses`` / ``ties``, ``sign_test_p`` (two-sided
        exact binomial test of wins against losses, ties left out) and ``median_rer``
        (median over the pairs of the per-seed relative error reduction).
    """
    from scipy import stats

    both = sorted(set(scores) & set(baseline_scores))
    seeds = [s for s in both if not (math.isnan(scores[s]) or math.isnan(baseline_scores[s]))]
    diffs = np.array([scores[s] - baseline_scores[s] for s in seeds], dtype=float)
    rers = [relative_error_reduction(scores[s], baseline_scores[s]) for s in seeds]
    nan = float("nan")
    out: dict[str, Any] = {
        "seeds": seeds,
        "n": len(seeds),
        "undefined": len(both) - len(seeds),
        "mean_diff": float(diffs.mean()) if len(seeds) else nan,
        "median_diff": float(np.median(diffs)) if len(seeds) else nan,
        "ci95": [nan, nan],
        "wins": int((diffs > 0).sum()),
        "losses": int((diffs < 0).sum()),
        "ties": int((diffs == 0).sum()),
        "sign_test_p": nan,
        "median_rer": float(np.nanmedian(rers)) if any(not math.isnan(r) for r in rers) else nan,
        # NaN per-seed reductions only where the baseline is perfect (no error to reduce)
    }
    if len(seeds) >= 2:
        half = stats.t.ppf(0.975, len(seeds) - 1) * diffs.std(ddof=1) / math.sqrt(len(seeds))
        out["ci95"] = [float(diffs.mean() - half), float(diffs.mean() + half)]
    decided = out["wins"] + out["losses"]
    if decided:
        out["sign_test_p"] = float(stats.binomtest(out["wins"], decided, 0.5).pvalue)
    return out


def summarize(runs: Sequence[dict[str, Any]], baseline: str) -> list[dict[str, Any]]:
    """Median over seeds per (task, variant), and a GLUE average row per variant.

    Args:
        runs: result dicts of single runs (keys task, variant, seed, metrics, score,
            positional_parameters).
        baseline: variant the relative error reduction is computed against.

    Returns:
        Rows with keys task, variant, seeds, metrics (median of each metric), score
        (median of the per-seed task scores), score_min, score_max, positional_parameters,
        relative_error_reduction (of the medians over the seeds that the variant and the
        baseline both have, so both sides cover the same seeds; NaN for the baseline itself
        or without a baseline), paired (:func:`paired_comparison` against the baseline,
        None for the baseline itself) and baseline. With several tasks, each variant that
        has all of them on at least one common seed gets a row with task ``"glue"``: per
        seed that has every task, the mean of its task scores (the GLUE average); its score
        is the median of those per-seed averages, and its min, max and paired comparison
        are over them too.
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["task"], r["variant"]), []).append(r)
    rows = []
    per_seed: dict[tuple[str, str], dict[int, float]] = {}
    for (task, variant), rs in groups.items():
        rs = sorted(rs, key=lambda r: r["seed"])
        scores = np.array([r["score"] for r in rs], dtype=float)
        per_seed[(task, variant)] = {r["seed"]: float(r["score"]) for r in rs}
        rows.append(
            {
                "task": task,
                "variant": variant,
                "seeds": [r["seed"] for r in rs],
                "metrics": {
                    m: float(np.median([r["metrics"][m] for r in rs])) for m in rs[0]["metrics"]
                },
                "score": float(np.median(scores)),
                "score_min": float(scores.min()),
                "score_max": float(scores.max()),
                "positional_parameters": rs[0]["positional_parameters"],
            }
        )
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    if len(tasks) > 1:
        for variant in dict.fromkeys(r["variant"] for r in rows):
            mine = {r["task"]: r for r in rows if r["variant"] == variant}
            complete = set.intersection(*(set(per_seed.get((t, variant), {})) for t in tasks))
            if set(mine) == set(tasks) and complete:
                averages = {
                    seed: float(np.mean([per_seed[(t, variant)][seed] for t in tasks]))
                    for seed in sorted(complete)
                }
                per_seed[("glue", variant)] = averages
                rows.append(
                    {
                        "task": "glue",
                        "variant": variant,
                        "seeds": sorted(complete),  # those behind min, max and pairing
                        "metrics": {},
                        "score": float(np.median(list(averages.values()))),
                        "score_min": float(np.min(list(averages.values()))),
                        "score_max": float(np.max(list(averages.values()))),
                        "positional_parameters": next(iter(mine.values()))["positional_parameters"],
                    }
                )
    tasks_of_baseline = {r["task"] for r in rows if r["variant"] == baseline}
    for r in rows:
        task, variant = r["task"], r["variant"]
        if variant == baseline or task not in tasks_of_baseline:
            r["relative_error_reduction"] = float("nan")
            r["paired"] = None
        else:
            mine, theirs = per_seed[(task, variant)], per_seed[(task, baseline)]
            common = sorted(set(mine) & set(theirs))
            r["relative_error_reduction"] = (
                relative_error_reduction(
                    float(np.median([mine[s] for s in common])),
                    float(np.median([theirs[s] for s in common])),
                )
                if common
                else float("nan")
            )
            r["paired"] = paired_comparison(mine, theirs)
        r["baseline"] = baseline
    return rows


def _pct(value: float, digits: int = 2) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{100 * value:.{digits}f}"


def summary_rows(summary: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Column labels and formatted rows (scores and metrics x 100) of the summary: one row
    per task and variant. Shared by the Markdown tables and report.html."""
    baseline = summary[0]["baseline"] if summary else "none"
    rows = []
    for r in summary:
        metrics = ", ".join(f"{k} {_pct(v)}" for k, v in r["metrics"].items()) or "GLUE average"
        spread = (
            "" if math.isnan(r["score_min"]) else f"{_pct(r['score_min'])} - {_pct(r['score_max'])}"
        )
        pos = r["positional_parameters"]
        rer = r["relative_error_reduction"]
        rows.append(
            [
                r["task"],
                r["variant"],
                len(r["seeds"]),
                metrics,
                _pct(r["score"]),
                spread,
                f"{pos['absolute']:,} / {pos['tisa']:,} / {pos['total']:,}",
                "-" if math.isnan(rer) else f"{100 * rer:+.1f}%",
            ]
        )
    columns = ["task", "variant", "seeds", "metrics (median)", "score (median)", "min - max"]
    columns += [
        "positional params (absolute / TISA / total)",
        f"rel. error reduction vs {baseline}",
    ]
    return columns, rows


def paired_rows(summary: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Column labels and formatted rows of the paired comparison over seeds (differences
    x 100), one row per task and compared variant; no rows with a single variant."""
    rows = []
    for r in summary:
        p = r.get("paired")
        if not p:
            continue
        lo, hi = p["ci95"]
        ci = "" if math.isnan(lo) else f" [{100 * lo:+.2f}, {100 * hi:+.2f}]"
        undefined = p.get("undefined", 0)
        rows.append(
            [
                r["task"],
                r["variant"],
                f"{p['n']} ({undefined} undefined)" if undefined else p["n"],
                f"{100 * p['mean_diff']:+.2f}{ci}",
                f"{100 * p['median_diff']:+.2f}",
                f"{p['wins']} / {p['losses']} / {p['ties']}",
                "n/a" if math.isnan(p["sign_test_p"]) else f"{p['sign_test_p']:.3g}",
                "n/a" if math.isnan(p["median_rer"]) else f"{100 * p['median_rer']:+.1f}%",
            ]
        )
    columns = ["task", "variant", "pairs", "mean diff [95% CI]", "median diff"]
    columns += ["wins / losses / ties", "sign test p", "median rel. error reduction"]
    return columns, rows


def summary_markdown(summary: Sequence[dict[str, Any]]) -> str:
    """The summary as a Markdown table (scores and metrics x 100), and with several
    variants the paired comparison over seeds."""
    baseline = summary[0]["baseline"] if summary else "none"
    text = markdown_table(*summary_rows(summary), align="llllrlrr")
    columns, rows = paired_rows(summary)
    if not rows:
        return text
    return (
        text + f"\nPaired over seeds against {baseline} (difference of scores x 100; same seed = "
        "same data order and head initialisation):\n\n"
        + markdown_table(columns, rows, align="llrlrrrr")
    )


def summary_csv(summary: Sequence[dict[str, Any]]) -> str:
    """The summary as CSV, one line per task and variant (metrics as fractions)."""
    metric_names = list(dict.fromkeys(m for r in summary for m in r["metrics"]))
    header = [
        "task",
        "variant",
        "n_seeds",
        "seeds",
        "score",
        "score_min",
        "score_max",
        *metric_names,
        "positional_absolute",
        "positional_tisa",
        "positional_total",
        "relative_error_reduction",
        "baseline",
    ]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for r in summary:
        pos = r["positional_parameters"]
        row = {
            "task": r["task"],
            "variant": r["variant"],
            "n_seeds": len(r["seeds"]),
            "seeds": " ".join(str(s) for s in r["seeds"]),
            "score": r["score"],
            "score_min": r["score_min"],
            "score_max": r["score_max"],
            **{m: r["metrics"].get(m, "") for m in metric_names},
            "positional_absolute": pos["absolute"],
            "positional_tisa": pos["tisa"],
            "positional_total": pos["total"],
            "relative_error_reduction": r["relative_error_reduction"],
            "baseline": r["baseline"],
        }
        writer.writerow(
            {k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        )
    return buffer.getvalue()


def parity_comparison(
    runs: Sequence[dict[str, Any]],
    variant: str,
    reference: dict[str, dict[str, tuple[float, float | None, int]]],
) -> list[dict[str, Any]]:
    """Compares one variant's runs with reference figures measured elsewhere on the same
    settings (e.g. the stock Hugging Face Trainer), metric by metric.

    Args:
        runs: result dicts of single runs (keys task, variant, seed, metrics).
        variant: the variant to check (e.g. ``"none"``).
        reference: task -> metric -> ``(mean, sd, seeds)`` of the reference; ``sd`` is
            None for a single seed.

    Returns:
        One row per reference metric that the variant has runs for: task, metric, seeds,
        mean and sd (ddof 1) over the variant's seeds, the reference's mean, sd and seeds,
        ``diff`` (variant - reference), ``noise`` (two standard errors of that difference,
        ``2 * sqrt(sd**2 / n + ref_sd**2 / ref_n)``; a one-seed reference borrows the
        variant's sd) and ``within_noise`` (``|diff| <= noise``; None with one seed of the
        variant, where no spread is known).
    """
    rows = []
    for task, metrics in reference.items():
        mine = [r for r in runs if r["task"] == task and r["variant"] == variant]
        for metric, (ref_mean, ref_sd, ref_n) in metrics.items():
            values = np.array([r["metrics"][metric] for r in mine if metric in r["metrics"]])
            values = values[~np.isnan(values)]
            if not len(values):
                continue
            sd = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
            ref_spread = sd if ref_sd is None else ref_sd
            noise = 2 * math.sqrt(sd**2 / len(values) + ref_spread**2 / ref_n)
            diff = float(values.mean()) - ref_mean
            rows.append(
                {
                    "task": task,
                    "metric": metric,
                    "seeds": len(values),
                    "mean": float(values.mean()),
                    "sd": sd,
                    "reference_mean": ref_mean,
                    "reference_sd": ref_sd,
                    "reference_seeds": ref_n,
                    "diff": diff,
                    "noise": noise,
                    "within_noise": None if math.isnan(noise) else bool(abs(diff) <= noise),
                }
            )
    return rows


def seedwise_parity(
    runs: Sequence[dict[str, Any]],
    variant: str,
    reference_runs: Sequence[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Compares one variant's runs with reference runs of the same (task, seed), metric by
    metric: whether two pipelines that should compute the same thing (e.g. ``tisa glue
    --tisa none`` and the stock Trainer, same seed, same settings) do.

    Args:
        runs: result dicts of single runs (keys task, variant, seed, metrics).
        variant: the variant to check (e.g. ``"none"``).
        reference_runs: result dicts of the reference (keys task, seed, metrics).

    Returns:
        One row per (task, seed, metric) that both have, sorted by task, seed and metric:
        ``value`` (the variant's), ``reference``, ``diff`` (variant - reference; NaN when
        either is NaN) and ``identical`` (the two equal to 1e-12, or both NaN: a metric
        undefined in both, e.g. an MCC of constant predictions).
    """
    mine = {(r["task"], r["seed"]): r["metrics"] for r in runs if r["variant"] == variant}
    rows = []
    for ref in reference_runs:
        metrics = mine.get((ref["task"], ref["seed"]))
        if metrics is None:
            continue
        for metric, ref_value in ref["metrics"].items():
            if metric not in metrics:
                continue
            value = float(metrics[metric])
            ref_value = float("nan") if ref_value is None else float(ref_value)
            diff = value - ref_value
            rows.append(
                {
                    "task": ref["task"],
                    "seed": ref["seed"],
                    "metric": metric,
                    "value": value,
                    "reference": ref_value,
                    "diff": diff,
                    "identical": bool(
                        abs(diff) <= 1e-12 or (math.isnan(value) and math.isnan(ref_value))
                    ),
                }
            )
    return sorted(rows, key=lambda r: (r["task"], r["seed"], r["metric"]))


def seedwise_parity_rows(
    rows: Sequence[dict[str, Any]], name: str = "reference"
) -> tuple[list[str], list[list[Any]]]:
    """Column labels and formatted rows of :func:`seedwise_parity` (scores to every digit
    recorded, the difference x 100)."""
    table = [
        [
            r["task"],
            r["seed"],
            r["metric"],
            repr(r["value"]),
            repr(r["reference"]),
            f"{100 * r['diff']:+.4f}",
            "yes" if r["identical"] else "no",
        ]
        for r in rows
    ]
    columns = ["task", "seed", "metric", "this library", name, "difference x 100", "identical"]
    return columns, table


def seedwise_parity_markdown(rows: Sequence[dict[str, Any]], name: str = "reference") -> str:
    """:func:`seedwise_parity` as a Markdown table."""
    return markdown_table(*seedwise_parity_rows(rows, name), align="lrlrrrl")


def parity_rows(
    rows: Sequence[dict[str, Any]], name: str = "reference"
) -> tuple[list[str], list[list[Any]]]:
    """Column labels and formatted rows (x 100) of :func:`parity_comparison`."""

    def mean_sd(mean, sd, n):
        spread = "" if sd is None or math.isnan(sd) else f" ± {100 * sd:.1f}"
        return f"{100 * mean:.1f}{spread} ({n})"

    table = [
        [
            r["task"],
            r["metric"],
            mean_sd(r["mean"], r["sd"], r["seeds"]),
            mean_sd(r["reference_mean"], r["reference_sd"], r["reference_seeds"]),
            f"{100 * r['diff']:+.1f}",
            "n/a" if math.isnan(r["noise"]) else f"{100 * r['noise']:.1f}",
            {True: "yes", False: "no", None: "n/a (one seed)"}[r["within_noise"]],
        ]
        for r in rows
    ]
    columns = ["task", "metric", "this library: mean ± sd (seeds)", f"{name}: mean ± sd (seeds)"]
    columns += ["difference", "2 standard errors", "within seed noise"]
    return columns, table


def parity_markdown(rows: Sequence[dict[str, Any]], name: str = "reference") -> str:
    """:func:`parity_comparison` as a Markdown table (x 100)."""
    return markdown_table(*parity_rows(rows, name), align="llllrrl")
