"""Helpers shared by the benchmark scripts (run them as `python benchmarks/NAME.py`, which puts this folder on
the import path)."""

from __future__ import annotations

import time

from rich.console import Console

from depthport.quiet import native_stderr_muted


def timed(console: Console, label: str, fn):
    """fn() with the converters' native logs muted; prints how long it took."""
    t0 = time.perf_counter()
    with native_stderr_muted():
        out = fn()
    console.print(f"{label}: {time.perf_counter() - t0:.0f} s")
    return out
