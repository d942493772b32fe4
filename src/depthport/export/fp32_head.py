"""The depth head in FP32 inside an fp16 .pte: mixed precision where XNNPACK allows it.

With its long reductions cut into chunks (``split_k``) the fp16 file's encoder computes within a few percent of
PyTorch's half precision, and the FP16 error left is the DPT head's: its convolutions work at up to the image's
full resolution, on few channels, and write the depth almost directly. DA3-Small 448x252, camera, XNNPACK's f16 kernels predicted (the FP16 ledger's
scopes): 2.37e-3 rel. L2 all in FP16, 1.94e-3 with the output convolutions in FP32, 1.69e-3 with the fusion blocks'
residual convolutions too, 1.08e-3 with the whole head (PyTorch half: 1.07e-3); this form, measured on FP16
arithmetic (Sapphire Rapids): 7.29e-4. So the head computes in FP32: its inputs (the encoder's
token maps, a prompt) are cast up once, its weights and buffers stay float32. XNNPACK converts no dtype inside a
subgraph, so the file holds two XNNPACK subgraphs, FP16 then FP32, with portable casts between them; the FP32 part
needs no split reductions and no lifted weights. Exact in real arithmetic.
"""

from __future__ import annotations

from itertools import chain

import torch
from torch import nn


def _up(obj):
    """Floating tensors in ``obj`` (a tensor, or lists and tuples of them) as float32."""
    if isinstance(obj, torch.Tensor):
        return obj.float() if obj.is_floating_point() else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_up(o) for o in obj)
    return obj


class Fp32Entry(nn.Module):
    """``module`` run on its inputs cast to float32. ``fp32_onward`` tells the FP16 simulation (``fp16.simulate``)
    that every op from here to the model's output computes in FP32; ``keep_fp32`` keeps the module's weights
    float32 (``half_except_kept``)."""

    fp32_onward = True
    keep_fp32 = True

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, *args):
        return self.module(*_up(args))


def keep_head_fp32(model: nn.Module) -> bool:
    """In place: ``model.head`` wrapped in ``Fp32Entry``. False for a model without a head."""
    head = getattr(model, "head", None)
    if not isinstance(head, nn.Module):
        return False
    model.head = Fp32Entry(head)
    return True


def kept_fp32(module: nn.Module) -> bool:
    """Whether ``module`` is (inside) the part kept in FP32: ``keep_head_fp32`` marks the entry, and its modules
    are found through ``kept_modules``."""
    return bool(getattr(module, "keep_fp32", False))


def kept_modules(model: nn.Module) -> set[int]:
    """ids of every module inside a module marked ``keep_fp32``, the marked ones included."""
    return {id(m) for entry in model.modules() if kept_fp32(entry) for m in entry.modules()}


def half_except_kept(model: nn.Module) -> nn.Module:
    """``model.half()`` in place, but for the modules marked ``keep_fp32``, which keep their float32 weights and
    buffers (``half`` followed by ``float`` would leave them rounded to FP16)."""
    kept = [m for m in model.modules() if kept_fp32(m)]
    originals = [[t.detach().clone() for t in chain(m.parameters(), m.buffers())] for m in kept]
    model.half()
    with torch.no_grad():
        for module, tensors in zip(kept, originals):
            module.float()
            for t, original in zip(chain(module.parameters(), module.buffers()), tensors):
                t.copy_(original)
    return model
