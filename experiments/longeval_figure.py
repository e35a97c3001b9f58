"""Acc@1 against document length from one or more ``tisa longeval`` results files: one
panel per task, one line per model and strategy, the lines named as in the doc tables
("original, chunk", "converted (TISA), whole document", ...).

    python experiments/longeval_figure.py benchmarks/results/longeval/results.json \\
        benchmarks/results/longeval/8192/results.json \\
        benchmarks/results/longeval/windows/results.json \\
        benchmarks/results/longeval/windows-8192/results.json \\
        --output benchmarks/results/longeval/accuracy.png

Runs of other lengths or strategies join into one figure. Where two files hold the same
model, strategy, task and length, the first file given is drawn, and a line says where the
later one differs. The numbers are those of the files, which the doc tables also read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tisa.doc_tables.longeval import who
from tisa.longeval.report import accuracy_figure
from tisa.longeval.results import merge_summaries
from tisa.reports.figures import save_figure


def _is_results(r: object) -> bool:
    """Whether ``r`` has what the figure reads of a tisa longeval results.json."""
    try:
        return (all(k in r["settings"] for k in ("tasks", "candidates"))
                and all({"model", "strategy", "task", "length", "acc1"} <= row.keys()
                        for row in r["summary"])
                and all({"name", "positions"} <= m.keys() for m in r["models"]))
    except (TypeError, KeyError, AttributeError):
        return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", type=Path, help="results.json of tisa longeval")
    p.add_argument("--output", type=Path, required=True, help="the figure (.png)")
    args = p.parse_args(argv)
    if args.output.is_dir():
        p.error(f"--output: {str(args.output)!r} is a folder; name the figure file (.png)")
    results = []
    for path in args.results:
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as err:
            p.error(f"results: cannot read {str(path)!r} as JSON ({err.__class__.__name__})")
        if not _is_results(results[-1]):
            p.error(f"results: {str(path)!r} is not a results.json of tisa longeval")
    summary, notes = merge_summaries(results, [str(p) for p in args.results])
    models = [m for r in results for m in r["models"]]
    tasks = list(dict.fromkeys(t for r in results for t in r["settings"]["tasks"]))
    lengths = sorted({row["length"] for row in summary})
    candidates = {r["settings"]["candidates"] for r in results}
    if len(candidates) != 1:
        p.error(f"results: the files rank among different numbers of documents "
                f"({sorted(candidates)}); chance would differ between lines")
    limits = [m["positions"] for m in models if m["positions"] is not None]
    fig = accuracy_figure(summary, tasks, lengths, chance=1 / candidates.pop(),
                          limits=limits, name=lambda m, s: who(m, s, models))
    save_figure(fig, args.output)
    for line in notes:
        print(line)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
