"""Tables of pretraining: the scoring rate sweep and the position schemes at their own rate."""

from __future__ import annotations

from pathlib import Path

from tisa.doc_tables.base import RESULTS, grouped, read_json, table
from tisa.reports.markdown import markdown_table


@table("pretrain-scoring-rate-sweep", f"{RESULTS}/pretrain/tisa-lr-sweep/*/results.json",
        f"{RESULTS}/pretrain/tisa-lr-sweep/*/metrics.csv")
def pretrain_rate_sweep(root: Path) -> str:
    """`tisa` at 1,000 steps with each learning rate of its scoring parameters."""
    rows = []
    for path in (root / RESULTS / "pretrain/tisa-lr-sweep").glob("*/results.json"):
        data = read_json(root, path.relative_to(root).as_posix())
        name = path.parent.name
        rate = name.split("-lr", 1)[1] if "-lr" in name else "backbone (5e-4)"
        moved = data.get("scoring_movement") or {}
        rows.append((float(rate) if "-lr" in name else 5e-4, [
            rate, data["step"], f"{data['eval_loss']:.3f}",
            *(f"{moved[k]['mean_abs_change']:.3f}" if k in moved else "n/a"
              for k in ("amplitude", "offset", "sharpness")),
        ]))
    rows.sort(key=lambda r: r[0])
    columns = ["scoring learning rate", "steps", "val. loss", "amplitudes moved",
               "centres moved", "sharpness moved"]
    return markdown_table(columns, [r for _, r in rows], align="lrrrrr")


@table("pretrain-own-rate", f"{RESULTS}/pretrain/position-schemes-tisa-lr/**/*.json",
        f"{RESULTS}/pretrain/position-schemes-tisa-lr/**/*.csv")
def pretrain_own_rate(root: Path) -> str:
    """The 2,500-step runs whose scoring parameters had their own learning rate."""
    data = read_json(root, f"{RESULTS}/pretrain/position-schemes-tisa-lr/summary.json")
    lengths = [int(n) for n in data["settings"]["lengths"]]
    train = int(data["settings"]["seq_len"])
    body = []
    for name, run in data["runs"].items():
        test = {int(k): v for k, v in run["test_loss"].items()}

        def rise(factor: int) -> str:
            far, near = test.get(train * factor), test.get(train)
            return "n/a" if far is None or near is None else f"{100 * (far / near - 1):+.1f}%"

        body.append([
            run["position"], f"{run['tisa_learning_rate']:g}",
            f"{run['final_validation_loss']:.3f}",
            *("n/a" if test.get(n) is None else f"{test[n]:.3f}" for n in lengths),
            f"{rise(8)} / {rise(16)}", grouped(run["positional_parameters"]["total"]),
        ])
    columns = ["position", "scoring rate", f"val. loss ({train})",
               *(f"test @{n}" for n in lengths), "rise 8x / 16x", "positional params"]
    return markdown_table(columns, body, align="ll" + "r" * (len(columns) - 2))
