"""A PyTorch module behind the runner interface: eager, no autograd, float32 in and out."""

from __future__ import annotations

import contextlib
from typing import Callable

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
    ``rebuild`` (a function returning the module) lets ``release`` free the module: it is built again on the next
    use; with ``rebuild``, ``model`` may be None (built on first use).
    """

    def __init__(self, model: nn.Module | None, input_hw: tuple[int, int], threads: int | None = None,
                 runtime: str = "torch-eager", dtype: torch.dtype = torch.float32,
                 extra_shapes: tuple[tuple[int, ...], ...] | None = None,
                 rebuild: Callable[[], nn.Module] | None = None):
        self.threads, self.runtime, self.dtype, self.rebuild = threads, runtime, dtype, rebuild
        self._model = model.eval().to(dtype) if model is not None else None
        self.input_shape = (1, 3, *input_hw)
        prompt_hw = getattr(model, "prompt_hw", None)
        self.extra_shapes = extra_shapes if extra_shapes is not None else ((1, 1, *prompt_hw),) if prompt_hw else ()

    @property
    def model(self) -> nn.Module:
        if self._model is None:
            self._model = self.rebuild().eval().to(self.dtype)
        return self._model

    @property
    def built(self) -> nn.Module | None:
        """The module if it is in memory now, else None."""
        return self._model

    def release(self) -> None:
        """Free the module when it can be built again (``rebuild``)."""
        if self.rebuild is not None:
            self._model = None

    @torch.no_grad()
    def run(self, x: np.ndarray, *extra: np.ndarray) -> np.ndarray:
        with torch_threads(self.threads):
            args = [torch.from_numpy(np.ascontiguousarray(a, np.float32)).to(self.dtype) for a in (x, *extra)]
            return self.model(*args).float().numpy()
