"""The one way figures and lists of names are written as text: in tables, cards, reports and the console."""

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


def listed(noun: str, names: list[str]) -> str:
    """'2 videos (IMG_0001.MOV, IMG_0002.MOV)': how many, the first three named."""
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return f"{len(names)} {noun}{'s' * (len(names) != 1)} ({shown})"


def in_words(items: list[str]) -> str:
    """'a, b and c'."""
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)
