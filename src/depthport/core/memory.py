"""Giving freed memory back to the system between the stages of a long export."""

from __future__ import annotations

import ctypes
import functools
import gc
import os
from pathlib import Path

# Below this resident set there is nothing worth the cost (a full garbage collection takes 0.1-0.5 s in a process
# that has converted a model): small models' exports stay far below any memory budget.
WORTH_BYTES = 3 << 30


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl). Looked up among the symbols this
    process has loaded: ``ctypes.util.find_library`` would fork ``ldconfig`` from a process that may hold gigabytes."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None


def resident_bytes() -> int | None:
    """This process's resident set now (Linux), or None where it cannot be read."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def available_bytes() -> int | None:
    """Memory the system can give without swapping (Linux ``MemAvailable``), or None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def give_back(worth: int = WORTH_BYTES) -> None:
    """Collect unreachable objects and return the C heap's free pages to the system, when the process holds more
    than ``worth`` bytes: a model freed by Python stays in the resident set otherwise, and the next stage's peak
    adds to it."""
    rss = resident_bytes()
    if rss is not None and rss < worth:
        return
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
