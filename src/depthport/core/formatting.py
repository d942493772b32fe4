"""The one way figures are written as text: in tables, cards, reports and the console."""

from __future__ import annotations


def fmt(value, spec: str = ".4g", missing: str | None = "-") -> str | None:
    """``value`` formatted with ``spec``; ``missing`` for None (not measured), yes/no for a bool, and any other
    value as its text."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format(value, spec)
    return str(value)
