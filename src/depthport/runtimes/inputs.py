"""The inputs a runner takes: one float32 array per input of the file, each of its shape."""

from __future__ import annotations

import numpy as np

from ..errors import InputError


def checked_inputs(name: str, shapes: tuple[tuple[int, ...], ...], arrays) -> list[np.ndarray]:
    """``arrays`` as contiguous float32, one per input of the file, each of the file's shape; else an InputError."""
    arrays = [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]
    if len(arrays) != len(shapes):
        raise InputError(f"{name} takes {len(shapes)} input(s) {[list(s) for s in shapes]}, got {len(arrays)}")
    for a, shape in zip(arrays, shapes):
        if tuple(a.shape) != tuple(shape):
            raise InputError(f"{name} takes input {list(shape)}, got {list(a.shape)}")
    return arrays
