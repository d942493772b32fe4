"""Reports: report.html (self-contained) beside report.json; the model card lives in card_step/card_cli."""

from .html import render, write_html

__all__ = ["render", "write_html"]
