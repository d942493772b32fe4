"""A PyTorch module behind the runner interface: eager, no autograd, float32 in and out."""

from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np
import torch
from torch import nn

from ..core.memory import give_back
from ..models.layers import query_chunks
from .conv_bands import BandedConv


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


def layers_of(model: nn.Module) -> list[nn.Module]:
    """The model's layers for progress: the modules held in its outermost ``nn.ModuleList``s (transformer blocks,
    DPT reassemble and fusion stages)."""
    layers: list[nn.Module] = []
    inside: set[int] = set()
    for module in model.modules():
        if id(module) in inside:
            continue
        if isinstance(module, nn.ModuleList):
            layers += list(module)
            inside.update(id(m) for m in module.modules())
    return layers


@contextlib.contextmanager
def layer_progress(model: nn.Module, on_layer: Callable[[int, int], None] | None):
    """``on_layer(done, total)`` after each of the model's layers (``layers_of``) finishes, within the block."""
    if on_layer is None:
        yield
        return
    layers = layers_of(model)
    done = [0]

    def finished(*_):
        done[0] = min(done[0] + 1, len(layers))
        on_layer(done[0], len(layers))

    handles = [m.register_forward_hook(finished) for m in layers]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


class TorchRunner:
    """A PyTorch module behind the runner interface (eager, no autograd); float32 in and out.

    Attention runs in blocks of query rows (``models.layers.query_chunks``). With ``dtype=torch.float64`` the module
    is converted in place and computes in float64, its convolutions in bands of rows (``conv_bands``: PyTorch's
    float64 convolution unfolds its whole input otherwise).
    ``extra_shapes``: the inputs after the image (default: a prompt of the module's ``prompt_hw``, for depthport's
    prompted models).
    ``rebuild`` (a function returning the module) lets ``release`` free the module: it is built again on the next
    use; with ``rebuild``, ``model`` may be None (built on first use).
    """

    def __init__(self, model: nn.Module | None, input_hw: tuple[int, int], threads: int | None = None,
                 runtime: str = "torch-eager", dtype: torch.dtype = torch.float32,
                 extra_shapes: tuple[tuple[int, ...], ...] | None = None,
                 rebuild: Callable[[], nn.Module] | None = None):
        self.threads, self.runtime, self.dtype, self.rebuild = threads, runtime, dtype, rebuild
        self.banded_convs = 0  # float64 convolutions run in bands of rows so far
        self.on_layer: Callable[[int, int], None] | None = None  # ``layer_progress`` of each run
        self._model = model.eval().to(dtype) if model is not None else None
        self.input_shape = (1, 3, *input_hw)
        prompt_hw = getattr(model, "prompt_hw", None)
        self.extra_shapes = extra_shapes if extra_shapes is not None else ((1, 1, *prompt_hw),) if prompt_hw else ()

    @property
    def model(self) -> nn.Module:
        if self._model is None:
            self._model = self.rebuild().eval().to(self.dtype)
            give_back()  # what building it freed (the weights read back, float32 tensors cast to float64)
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
            banded = BandedConv() if self.dtype == torch.float64 else None
            with layer_progress(self.model, self.on_layer), query_chunks(), banded or contextlib.nullcontext():
                out = self.model(*args).float().numpy()
            self.banded_convs += banded.bands if banded is not None else 0
            return out
