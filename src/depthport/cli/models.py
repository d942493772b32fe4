"""`depthport models`: the supported model ids, their weights' licences and default shapes."""

from __future__ import annotations

from .common import console


def add_parser(subparsers):
    p = subparsers.add_parser("models", help="list supported model ids and their licences")
    p.add_argument("--all", action="store_true", help="include test-only configurations")
    return p


def run(args) -> int:
    from rich.table import Table

    from ..registry import MODELS

    table = Table(title="depthport models")
    for col in ("id", "family", "weights licence", "default size", "transformers checkpoint", "official checkpoint"):
        table.add_column(col)
    for spec in MODELS.values():
        if spec.hidden and not args.all:
            continue
        table.add_row(spec.id, spec.family, spec.licence, "x".join(map(str, spec.default_hw)), spec.hf_repo or "-",
                      f"{spec.official_repo}/{spec.official_file}" if spec.official_repo else "-")
    console().print(table)
    return 0
