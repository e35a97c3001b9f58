"""The tables of the README and the docs, written from the committed result files.

Every table that quotes a measured figure sits between two markers and is generated,
never typed::

    <!-- table: glue-scores -->
    | variant | ... |
    <!-- /table -->

``python -m tisa.doc_tables`` rewrites the text between each pair of markers from the
files the table is declared over (:data:`TABLES`); ``--check`` changes nothing and exits 1
when a table differs from what its files give. A default-tier test runs the check and
also fails when a committed result file is claimed by no table, or a table by no page.

A table is a function of the repository root that returns Markdown, registered with the
glob patterns (relative to the root) of the files it reads. Renderers read JSON only: this
module composes the results of every feature and imports none of them.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from pathlib import Path

# each module registers its tables in TABLES when imported
from tisa.doc_tables import (
    analysis,
    bench,
    convert,
    demo,
    glue,
    longeval,
    package,
    pretrain,
    targets,
)
from tisa.doc_tables.base import MARKER, RESULTS, ROOT, TABLES, DocTable
from tisa.doc_tables.glue import GLUE_SUMMARY

__all__ = [
    "GLUE_SUMMARY",
    "PAGES",
    "RESULTS",
    "RESULT_PATTERNS",
    "ROOT",
    "TABLES",
    "DocTable",
    "check",
    "claimed_files",
    "render",
    "result_files",
    "unclaimed_files",
    "update",
]

_MODULES = (analysis, bench, convert, demo, glue, longeval, package, pretrain, targets)
# the pages that hold generated tables
PAGES = ("README.md", "docs/*.md")
# the raw files every one of which some table must read
RESULT_PATTERNS = (f"{RESULTS}/**/*.json", f"{RESULTS}/**/*.csv", f"{RESULTS}/**/*.jsonl")


def _pages(root: Path) -> list[Path]:
    pages: list[Path] = []
    for pattern in PAGES:
        pages.extend(sorted(root.glob(pattern)))
    return pages


def _glob(root: Path, patterns: Iterable[str]) -> set[Path]:
    return {p for pattern in patterns for p in root.glob(pattern) if p.is_file()}


def result_files(root: Path = ROOT) -> set[Path]:
    """Every raw result file (JSON, CSV, JSON lines) under ``benchmarks/results``."""
    return _glob(root, RESULT_PATTERNS)


def claimed_files(root: Path = ROOT) -> set[Path]:
    """The files that the registered tables declare they read."""
    return _glob(root, (s for t in TABLES.values() for s in t.sources))


def unclaimed_files(root: Path = ROOT) -> list[str]:
    """Result files that no table reads (each one a figure nobody can see), sorted."""
    return sorted(p.relative_to(root).as_posix() for p in result_files(root) - claimed_files(root))


def render(name: str, root: Path = ROOT) -> str:
    """The Markdown of one registered table."""
    if name not in TABLES:
        raise ValueError(f"table {name!r} is not registered; known: {', '.join(sorted(TABLES))}")
    return TABLES[name].render(root)


def update(root: Path = ROOT, *, write: bool = True) -> list[str]:
    """Rewrites every marked table of the pages; returns the problems found.

    A problem is a table whose text differs from what its files give (rewritten when
    ``write``), a marker naming no registered table, or a registered table on no page.
    """
    problems: list[str] = []
    placed: set[str] = set()
    cache: dict[str, str] = {}
    for page in _pages(root):
        text = page.read_text(encoding="utf-8")
        rel = page.relative_to(root).as_posix()

        def fill(match: re.Match[str], rel: str = rel) -> str:
            name = match["name"]
            if name not in TABLES:
                problems.append(f"{rel}: marker names no registered table: {name!r}")
                return match[0]
            placed.add(name)
            if name not in cache:
                cache[name] = render(name, root)
            if match["body"] != cache[name]:
                problems.append(f"{rel}: table {name!r} differs from its result files")
            return match["open"] + cache[name] + match["close"]

        new = MARKER.sub(fill, text)
        if write and new != text:
            page.write_text(new, encoding="utf-8")
    problems += [f"table {n!r} is on no page" for n in sorted(set(TABLES) - placed)]
    return problems


def check(root: Path = ROOT) -> list[str]:
    """The problems :func:`update` would fix or report, changing nothing."""
    return update(root, write=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tisa.doc_tables",
        description="Write the README's and the docs' tables from the committed result files.",
    )
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a table differs from its files")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the repository (default: this one)")
    args = parser.parse_args(argv)
    try:
        problems = check(args.root) if args.check else update(args.root)
    except (FileNotFoundError, ValueError) as err:
        print(f"doc_tables: error: {err}", file=sys.stderr)
        return 2
    unclaimed = unclaimed_files(args.root)
    for p in problems:
        print(p)
    for f in unclaimed:
        print(f"{f}: no table reads this result file")
    if args.check:
        return 1 if problems or unclaimed else 0
    stale = [p for p in problems if "differs" not in p]
    print(f"{len(TABLES)} tables written" + (f"; {len(stale)} problems" if stale else ""))
    return 1 if stale or unclaimed else 0


