"""`depthport models`: the supported model ids, their weights' licences and default shapes."""

from __future__ import annotations

from ..core.report_model import Units, load
from ..spec import focal_formula
from .common import console


def add_parser(subparsers):
    p = subparsers.add_parser("models", help="list supported model ids and their licences")
    p.add_argument("--all", action="store_true", help="include test-only configurations")
    return p


def run(args) -> int:
    from rich.table import Table

    from ..registry import MODELS

    table = Table(title="depthport models")
    for col in ("id", "family", "output", "weights licence", "default size", "transformers checkpoint",
                "official checkpoint"):
        table.add_column(col, no_wrap=col in ("id", "output"), overflow="fold")
    notes = {}
    for spec in MODELS.values():
        if spec.hidden and not args.all:
            continue
        licence = spec.licence + (" (non-commercial)" if spec.non_commercial else "")
        if spec.licence_note:
            mark = notes.setdefault(spec.licence_note, len(notes) + 1)
            licence += f" [{mark}]"
        table.add_row(spec.id, spec.family, _output(spec), licence, "x".join(map(str, spec.default_hw)),
                      spec.hf_repo or "-", f"{spec.official_repo}/{spec.official_file}" if spec.official_repo else "-")
    out = console()
    out.print(table)
    for note, mark in notes.items():
        out.print(f"[{mark}] {note}", highlight=False)
    return 0


def _output(spec) -> str:
    """The output's meaning, with its unit: 'metres (0-20 m)', 'metres = value x focal_px / 300', ..."""
    units = load(Units, spec.units())
    if spec.prompted:
        h, w = spec.prompt_hw
        return f"metres (prompt depth {h}x{w} in)"
    if units.max_depth_m is not None:
        return f"metres (0-{units.max_depth_m:g} m)"
    if units.focal_reference_px is not None:
        return focal_formula(units.focal_reference_px)
    return units.meaning
