"""Tables of the package itself: one line per module."""

from __future__ import annotations

from pathlib import Path

from tisa.doc_tables.base import table
from tisa.reports.markdown import markdown_table

#: a module longer than this is named with its size in docs/design.md
LONG_MODULE = 500


@table("design-modules", "tisa/**/*.py")
def design_modules(root: Path) -> str:
    """Every module of the package with the first sentence of its docstring."""
    import ast

    body = []
    for path in sorted((root / "tisa").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(text)) or ""
        first = " ".join(doc.strip().split("\n\n")[0].split())
        end = first.find(". ")
        sentence = first if end < 0 else first[: end + 1]
        lines = len(text.splitlines())  # only whether it is long: sizes change every edit
        body.append([f"`{rel}`", sentence.replace("|", "\\|"),
                     "yes" if lines > LONG_MODULE else ""])
    return markdown_table(["module", "what it holds", f"over {LONG_MODULE} lines"], body,
                          align="lll")
