"""Loaded by Python at start-up in child processes whose PYTHONPATH names this folder (as coverage.py does):
those children use the test session's conversion memo (`tests/conversion_memo.py`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import conversion_memo  # noqa: E402

conversion_memo.install_from_env()
