"""A PyTorch module behind the runner interface: eager, no autograd, float32 in and out."""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import nn


@contextlib.contextmanager
def torch_threads(n: int | None):
    """torch's intra-op thread count set to ``n`` for the block."""
    saved = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


class TorchRunner:
    """A PyTorch module behind the runner interface (eager, no autograd); float32 in and out.

    With ``dtype=torch.float64`` the module is converted in place and computes in float64. ``extra_shapes``: the
    inputs after the image (default: a prompt of the module's ``prompt_hw``, for depthport's prompted models).
    """

    def __init__(self, model: nn.Module, input_hw: tuple[int, int], threads: int | None = None,
                 runtime: str = "torch-eager", dtype: torch.dtype = torch.float32,
                 extra_shapes: tuple[tuple[int, ...], ...] | None = None):
        self.model, self.threads, self.runtime, self.dtype = model.eval().to(dtype), threads, runtime, dtype
        self.input_shape = (1, 3, *input_hw)
        prompt_hw = getattr(model, "prompt_hw", None)
        self.extra_shapes = extra_shapes if extra_shapes is not None else ((1, 1, *prompt_hw),) if prompt_hw else ()

    @torch.no_grad()
    def run(self, x: np.ndarray, *extra: np.ndarray) -> np.ndarray:
        with torch_threads(self.threads):
            args = [torch.from_numpy(np.ascontiguousarray(a, np.float32)).to(self.dtype) for a in (x, *extra)]
            return self.model(*args).float().numpy()
