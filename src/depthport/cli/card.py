"""`depthport card DIR`: regenerate the model card from DIR/report.json without re-exporting."""

from __future__ import annotations

import argparse


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("card", help="regenerate the model card (README.md) of an export folder")
    parser.add_argument("dir", help="export folder holding report.json")
    return parser


def run(args) -> int:
    from ..report.card import write_card

    print(f"wrote {write_card(args.dir)}")
    return 0
