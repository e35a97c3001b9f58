"""Self-contained HTML reports: headings, paragraphs, tables and PNG figures in one file.

Generic building blocks, usable by any command that wants a report::

    from tisa.reports.html import Image, Section, Table, write_report

    write_report(
        "out/report.html",
        "My analysis",
        [Section("Results", paragraphs=["What `TI` means ..."],
                 tables=[Table(["model", "TI"], [["bert", 0.91]])],
                 figures=[Image(png_bytes, caption="P P^T")])],
        summary=Table(["model", "TI"], [["bert", 0.91]]),
    )

Figures are embedded as base64 ``data:`` URIs, so the HTML file can be mailed or opened
anywhere without its folder. Text is HTML-escaped; inline ```code``` in backticks
becomes ``<code>``; wrap trusted markup in :class:`Html` to insert it unchanged.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tisa.files import write_atomic

__all__ = ["Html", "Image", "Section", "Table", "render_report", "write_report"]


class Html(str):
    """Trusted HTML: inserted into the report without escaping."""


@dataclass
class Table:
    """A table of values.

    Attributes:
        columns: header labels.
        rows: one sequence of cells per row (str, int, float, bool, None or :class:`Html`).
        caption: text shown above the table.
        digits: decimals for floats.
        shade: indices of columns whose numbers lie in [0, 1] (e.g. TI) and get a
            background bar proportional to the value.
        notes: text shown under the table.
    """

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    caption: str = ""
    digits: int = 3
    shade: Sequence[int] = ()
    notes: str = ""

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(
                    f"rows[{i}] has {len(row)} cells; expected {len(self.columns)} (columns)"
                )


@dataclass
class Image:
    """A PNG figure: raw bytes or a path to a PNG file.

    Attributes:
        data: PNG bytes or file path.
        caption: text under the figure.
        alt: alternative text (defaults to the caption).
        wide: span the full width (otherwise two small figures may share a row).
    """

    data: bytes | str | Path
    caption: str = ""
    alt: str = ""
    wide: bool = True

    def data_uri(self) -> str:
        raw = self.data if isinstance(self.data, bytes) else Path(self.data).read_bytes()
        return "data:image/png;base64," + base64.b64encode(raw).decode("ascii")


@dataclass
class Section:
    """A heading with paragraphs, tables, figures and optional subsections (in that order)."""

    heading: str
    paragraphs: Sequence[str] = ()
    tables: Sequence[Table] = ()
    figures: Sequence[Image] = ()
    subsections: Sequence[Section] = field(default_factory=list)
    anchor: str | None = None


_CSS = """
:root { --fg:#1d2430; --muted:#5b6675; --line:#dfe3ea; --bg:#ffffff; --soft:#f5f7fa;
        --accent:#2f6fb0; --shade:#cfe3f6; }
* { box-sizing: border-box; }
body { margin:0; background:var(--soft); color:var(--fg);
       font:15px/1.55 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width:1180px; margin:0 auto; padding:28px 32px 48px; background:var(--bg);
       min-height:100vh; box-shadow:0 0 0 1px var(--line); }
header h1 { margin:0 0 4px; font-size:26px; letter-spacing:-0.01em; }
header .subtitle { color:var(--muted); margin:0 0 2px; }
header .meta { color:var(--muted); font-size:13px; margin:0 0 18px; }
h2 { font-size:20px; margin:36px 0 10px; padding-top:12px; border-top:1px solid var(--line); }
h3 { font-size:16.5px; margin:26px 0 8px; }
h4 { font-size:15px; margin:20px 0 6px; }
p { margin:8px 0; max-width:920px; }
code { font:13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
       background:var(--soft); padding:1px 4px; border-radius:3px; }
nav.toc { background:var(--soft); border:1px solid var(--line); border-radius:6px;
          padding:10px 16px; margin:16px 0; font-size:14px; }
nav.toc ol { margin:4px 0; padding-left:20px; }
nav.toc a { color:var(--accent); text-decoration:none; }
.summary { border:1px solid var(--line); border-radius:8px; padding:6px 16px 12px;
           margin:12px 0 8px; background:#fbfcfe; }
.summary h2 { border:none; margin-top:8px; padding-top:0; }
.table-wrap { overflow-x:auto; margin:10px 0 14px; }
table { border-collapse:collapse; font-size:13.5px; min-width:40%; }
caption { caption-side:top; text-align:left; color:var(--muted); padding:0 0 6px;
          font-size:13.5px; }
th, td { padding:5px 9px; border-bottom:1px solid var(--line); text-align:left;
         white-space:nowrap; }
th { background:var(--soft); font-weight:600; border-bottom:2px solid var(--line);
     white-space:normal; vertical-align:bottom; min-width:64px; font-size:13px; }
td.num { text-align:right; font-variant-numeric:tabular-nums; }
tbody tr:hover td { background:#f0f5fb; }
td.first { font-weight:600; }
td.bar { background-image:linear-gradient(var(--accent), var(--accent));
         background-repeat:no-repeat; background-position:left bottom; }
.note { color:var(--muted); font-size:13px; }
.figures { display:flex; flex-wrap:wrap; gap:18px; margin:12px 0; }
figure { margin:0; flex:1 1 440px; max-width:100%; }
figure.wide { flex-basis:100%; }
figure img { max-width:100%; height:auto; border:1px solid var(--line); border-radius:4px;
             background:#fff; }
figcaption { color:var(--muted); font-size:13px; margin-top:4px; }
footer { color:var(--muted); font-size:12.5px; margin-top:40px; border-top:1px solid
         var(--line); padding-top:10px; }
"""


def _text(value: str) -> str:
    if isinstance(value, Html):
        return str(value)
    escaped = html.escape(str(value), quote=False)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _cell(value: Any, digits: int) -> tuple[str, bool]:
    """(html, is_number)."""
    if value is None:
        return "&ndash;", False
    if isinstance(value, Html):
        return str(value), False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, int):
        return f"{value:,}", True
    if isinstance(value, float):
        if math.isnan(value):
            return "&ndash;", False
        return f"{value:.{digits}f}", True
    return _text(str(value)), False


def _slug(text: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    slug, n = base, 2
    while slug in used:
        slug, n = f"{base}-{n}", n + 1
    used.add(slug)
    return slug


def _table(t: Table) -> str:
    out = ['<div class="table-wrap"><table>']
    if t.caption:
        out.append(f"<caption>{_text(t.caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{_text(c)}</th>" for c in t.columns) + "</tr>")
    out.append("</thead><tbody>")
    shade = set(t.shade)
    for row in t.rows:
        cells = []
        for i, value in enumerate(row):
            content, number = _cell(value, t.digits)
            classes = ["num"] if number else []
            if i == 0:
                classes.append("first")
            style = ""
            if i in shade and number and isinstance(value, float) and 0.0 <= value <= 1.0:
                pct = round(100 * value, 1)
                style = f' style="background-size:{pct}% 3px"'
                classes.append("bar")
            cls = f' class="{" ".join(classes)}"' if classes else ""
            cells.append(f"<td{cls}{style}>{content}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    if t.notes:
        out.append(f'<p class="note">{_text(t.notes)}</p>')
    return "\n".join(out)


def _figures(images: Sequence[Image]) -> str:
    if not images:
        return ""
    out = ['<div class="figures">']
    for img in images:
        alt = html.escape(img.alt or img.caption or "figure")
        cls = ' class="wide"' if img.wide else ""
        caption = f"<figcaption>{_text(img.caption)}</figcaption>" if img.caption else ""
        out.append(f'<figure{cls}><img src="{img.data_uri()}" alt="{alt}">{caption}</figure>')
    out.append("</div>")
    return "\n".join(out)


def _section(s: Section, level: int, used: set[str]) -> str:
    anchor = s.anchor or _slug(s.heading, used)
    tag = f"h{min(level, 6)}"
    parts = [f'<section id="{html.escape(anchor)}"><{tag}>{_text(s.heading)}</{tag}>']
    parts += [f"<p>{_text(p)}</p>" for p in s.paragraphs]
    parts += [_table(t) for t in s.tables]
    parts.append(_figures(s.figures))
    parts += [_section(sub, level + 1, used) for sub in s.subsections]
    parts.append("</section>")
    return "\n".join(p for p in parts if p)


def render_report(
    title: str,
    sections: Sequence[Section],
    *,
    subtitle: str | None = None,
    intro: Sequence[str] = (),
    summary: Table | Sequence[Table] | None = None,
    summary_heading: str = "Summary",
    summary_paragraphs: Sequence[str] = (),
    toc: bool = True,
    footer: str | None = None,
    timestamp: bool = True,
) -> str:
    """Builds a standalone HTML page.

    Args:
        title: page title and top heading.
        sections: the body, in order (each rendered as an ``<h2>`` with nested levels).
        subtitle: one line under the title.
        intro: paragraphs under the title.
        summary: table(s) shown in a framed box at the top.
        summary_heading: heading of that box.
        summary_paragraphs: paragraphs under the summary table(s).
        toc: list the sections with links.
        footer: small print at the bottom.
        timestamp: print the creation time under the title.

    Returns:
        The HTML document as a string.
    """
    used: set[str] = set()
    body = [f"<header><h1>{_text(title)}</h1>"]
    if subtitle:
        body.append(f'<p class="subtitle">{_text(subtitle)}</p>')
    if timestamp:
        now = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        body.append(f'<p class="meta">Created {now}</p>')
    body.append("</header>")
    body += [f"<p>{_text(p)}</p>" for p in intro]
    if summary is not None:
        tables = [summary] if isinstance(summary, Table) else list(summary)
        body.append(f'<div class="summary"><h2>{_text(summary_heading)}</h2>')
        body += [_table(t) for t in tables]
        body += [f'<p class="note">{_text(p)}</p>' for p in summary_paragraphs]
        body.append("</div>")
    rendered = [_section(s, 2, used) for s in sections]
    if toc and len(sections) > 1:
        anchors = re.findall(r'<section id="([^"]+)"><h2>(.*?)</h2>', "\n".join(rendered))
        items = "".join(f'<li><a href="#{a}">{h}</a></li>' for a, h in anchors)
        body.append(f'<nav class="toc"><strong>Contents</strong><ol>{items}</ol></nav>')
    body += rendered
    if footer:
        body.append(f"<footer>{_text(footer)}</footer>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        "<body><main>\n" + "\n".join(body) + "\n</main></body>\n</html>\n"
    )


def write_report(path: str | Path, title: str, sections: Sequence[Section], **options: Any) -> Path:
    """Renders with :func:`render_report` and writes UTF-8 HTML to ``path``."""
    return write_atomic(path, render_report(title, sections, **options))
