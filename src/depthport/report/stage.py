"""report: a self-contained report.html beside report.json."""

from __future__ import annotations

from ..core.schema import ReportJson
from .html import write_html


def apply(ctx, report: dict | ReportJson) -> None:
    report = ReportJson(report)
    report.report_html = "report.html"
    write_html(ctx.out_dir / "report.html", report.data, ctx.figures)
