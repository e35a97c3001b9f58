"""Offset retrieval against length, as trained and with an inference-time variant: one figure.

    python experiments/offset_retrieval/figure.py runs/offset-retrieval/clip-127-to4096.json

Reads a file written by ``experiments/offset_retrieval/rescore.py`` (which scores the saved
models of a run as trained and with log-n scaling or clipped offsets, at the run's lengths
or at those of ``--eval-lengths``) and writes the figure beside it (same name, ``.png``):
the accuracy of every scheme at every length, the mean over seeds, as trained (dashed) and
with the variant (solid, the same colour), the training length dotted. The numbers are
those of the file, which the doc tables also read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def draw(data: dict[str, Any]):
    """The figure of a rescore file."""
    from matplotlib import colormaps

    from tisa.pretrain.schemes import describe_variant
    from tisa.reports.charts import extrapolation_curves

    lengths = [int(n) for n in data["eval_lengths"]]
    label = describe_variant(data["length_scale"], data["clip_distance"], short=True)
    curves, styles, train = {}, {}, {}
    colours = colormaps["tab10"].colors
    schemes = list(data["trained_summary"]["schemes"])
    for i, position in enumerate(schemes):
        for name, summary, dashes in (("as trained", data["trained_summary"], "--"),
                                      (label, data["summary"], "-")):
            per_length = summary["schemes"].get(position)
            if per_length is None:
                continue
            key = f"{position}, {name}"
            curves[key] = [(n, 100 * per_length[str(n)]["accuracy"]["mean"]) for n in lengths
                           if per_length[str(n)]["status"] == "ok"]
            styles[key] = {"color": colours[i % len(colours)], "linestyle": dashes}
            if not train:  # one dotted line: the training length is the run's
                train[key] = int(data["run"]["settings"]["train_length"])
    seeds = ", ".join(data["trained_runs"])
    return extrapolation_curves(
        curves, lengths, train, styles=styles, ylabel="accuracy x 100 (mean over seeds)",
        title=f"Offset retrieval (seeds {seeds}; dashed: as trained; solid: {label}; "
              f"dotted: training length)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="a JSON file of rescore.py")
    args = parser.parse_args(argv)
    try:
        data = json.loads(args.file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise SystemExit(f"file: cannot read {args.file} ({err})") from None
    if "trained_summary" not in data:
        raise SystemExit(f"file: {args.file} is not a file of rescore.py (no trained_summary; "
                         "rescore again with this version)")
    from tisa.reports.figures import save_figure

    out = save_figure(draw(data), args.file.with_suffix(".png"))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
