"""Giving freed memory back to the system between the stages of a long export."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def give_back() -> None:
    """Collect unreachable objects and return the C heap's free pages to the system: a model freed by Python stays
    in the process's resident set otherwise, and the next stage's peak adds to it."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
