"""Offset retrieval against length, as trained and with an inference-time variant: one figure.

    python experiments/offset_retrieval/figure.py runs/offset-retrieval/clip-127-to4096.json
    python experiments/offset_retrieval/figure.py runs/or-a/results.json runs/or-b/results.json \
        --output runs/or-a/schemes.png

Reads a file written by ``experiments/offset_retrieval/rescore.py`` (which scores the saved
models of a run as trained and with log-n scaling or clipped offsets, at the run's lengths
or at those of ``--eval-lengths``) and writes the figure beside it (same name, ``.png``):
the accuracy of every scheme at every length, the mean over seeds, as trained (dashed) and
with the variant (solid, the same colour), the training length dotted.

Or reads one or more ``results.json`` of ``experiments/offset_retrieval/run.py`` (folders
of the same settings trained apart, on other devices say, each scheme in one of them) and
draws every scheme of them as trained, the mean over seeds with a band of ± one sd, each
labelled with where it trained when the schemes trained in more than one place;
``--output`` names the figure (default: beside the first file). The numbers are those of
the files, which the doc tables also read.
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


def draw_results(files: list[dict[str, Any]]):
    """The figure of one or more ``results.json`` of run.py: every scheme as trained."""
    from matplotlib import colormaps

    from tisa.pretrain.offset_retrieval import trained_where
    from tisa.reports.charts import extrapolation_curves

    lengths = sorted({int(n) for f in files for n in f["settings"]["eval_lengths"]})
    places = {trained_where(f, p) for f in files for p in f["summary"]["schemes"]}
    colours = colormaps["tab10"].colors
    curves, bands, styles, train = {}, {}, {}, {}
    for f in files:
        for position, per_length in f["summary"]["schemes"].items():
            where = trained_where(f, position).replace(" (from the file's settings)", "")
            key = f"{position} ({where})" if len(places) > 1 else position
            ok = [n for n in map(int, f["settings"]["eval_lengths"])
                  if per_length[str(n)]["status"] == "ok"]
            cells = [per_length[str(n)]["accuracy"] for n in ok]
            curves[key] = [(n, 100 * c["mean"]) for n, c in zip(ok, cells, strict=True)]
            bands[key] = [(n, 100 * (c["mean"] - c["sd"]), 100 * (c["mean"] + c["sd"]))
                          for n, c in zip(ok, cells, strict=True)]
            styles[key] = {"color": colours[len(styles) % len(colours)]}
            if not train:
                train[key] = int(f["settings"]["train_length"])
    seeds = sorted({s for f in files for s in f["summary"]["seeds"]})
    fig = extrapolation_curves(
        curves, lengths, train, styles=styles, ylabel="accuracy x 100 (mean ± sd over seeds)",
        title=f"Offset retrieval as trained (seeds {', '.join(map(str, seeds))}; "
              "dotted: training length)",
    )
    ax = fig.axes[0]
    for key, band in bands.items():
        xs, lo, hi = zip(*band, strict=True)
        ax.fill_between(xs, lo, hi, color=styles[key]["color"], alpha=0.15, linewidth=0)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+", metavar="file",
                        help="a JSON file of rescore.py, or results.json files of run.py")
    parser.add_argument("--output", type=Path, default=None,
                        help="the figure (default: beside the first file, as .png)")
    args = parser.parse_args(argv)
    data = []
    for file in args.files:
        try:
            data.append(json.loads(file.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as err:
            raise SystemExit(f"file: cannot read {file} ({err})") from None
    rescored = ["trained_summary" in d for d in data]
    runs = ["summary" in d and "runs" in d and "settings" in d for d in data]
    if any(rescored):
        if len(data) > 1:
            raise SystemExit("file: a file of rescore.py is drawn alone, got "
                             f"{len(data)} files")
        figure = draw(data[0])
    elif all(runs):
        from tisa.pretrain.offset_retrieval import merge_folders

        try:  # the same settings, each scheme in one file
            merge_folders([(str(f), d) for f, d in zip(args.files, data, strict=True)])
        except ValueError as err:
            raise SystemExit(f"file: {err}") from None
        figure = draw_results(data)
    else:
        bad = next(f for f, r in zip(args.files, runs, strict=True) if not r)
        raise SystemExit(f"file: {bad} is neither a file of rescore.py (no trained_summary; "
                         "rescore again with this version) nor a results.json of run.py")
    from tisa.reports.figures import save_figure

    out = save_figure(figure, args.output or args.files[0].with_suffix(".png"))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
