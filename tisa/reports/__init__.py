"""Reports: HTML pages, figures and Markdown tables, built from results computed elsewhere.

* :mod:`tisa.reports.html`: standalone HTML pages (``Section``, ``Table``, ``Image``,
  ``write_report``);
* :mod:`tisa.reports.figures`: a figure as PNG bytes or file; :mod:`tisa.reports.heatmaps`
  (matrices) and :mod:`tisa.reports.charts` (curves and bars) draw them;
* :mod:`tisa.reports.markdown`: Markdown tables.

Each feature writes its own report with this kit (:mod:`tisa.analysis.report`,
:mod:`tisa.glue.report`, :mod:`tisa.convert.report`, :mod:`tisa.longeval.report`).

Nothing here computes a metric: every number comes in computed (typed results of
:mod:`tisa.analysis`, rows of :mod:`tisa.glue.run`, ...). The HTML building blocks are
importable from this package directly; the drawing modules load matplotlib when used.
"""

from tisa.reports.html import Html, Image, Section, Table, render_report, write_report
from tisa.reports.markdown import markdown_table

__all__ = [
    "Html",
    "Image",
    "Section",
    "Table",
    "markdown_table",
    "render_report",
    "write_report",
]
