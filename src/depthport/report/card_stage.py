"""write the model card (README.md) from the report"""

from __future__ import annotations

from ..atomic import write_text
from ..core.schema import ReportJson
from .card import render


def apply(ctx, report: dict | ReportJson) -> None:
    write_text(ctx.out_dir / "README.md", render(ReportJson(report).data))
