"""Short FP16 reductions for XNNPACK: every long dot product cut into chunks whose partial results are added in
a tree.

XNNPACK's f16 GEMM, convolution and batch-matmul kernels accumulate in FP16, one fused multiply-add per product
along the whole reduction (``fp16.kernels``), so their rounding error grows with its length K (about
u sqrt(K/2), u = 2^-11). Computing sum_k over chunks of ``chunk`` products and adding the chunk results pairwise
is the same number in exact arithmetic, and in FP16 costs about u sqrt(chunk/2 + log2(K/chunk)) instead. For
convolutions the chunk is counted in products (input channels x kernel taps). The attention's Q·Kᵀ (K = head
dim) and attention x V (K = tokens), and the norms' mean as a linear map, are split the same way
(``models.layers.matmul_split``; ``LinearMeanNorm.split``).

The form changes the graph (more, smaller FULLY_CONNECTED / CONV_2D / BATCH_MATMUL ops and the ADDs between
them), not what the model computes: in FP32 it differs from the unsplit model by float32 reassociation only.
It is not a default: at DA-V2-Small 518x686 with chunks of 16 the graph has thousands more ops and ExecuTorch's
lowering ran out of 24 GB. ``benchmarks/fp16_floor.py --split-k N --no-pte`` measures what it would buy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..models.layers import slices, tree_sum


class SplitLinear(nn.Module):
    """nn.Linear as FULLY_CONNECTEDs over chunks of its input features (the bias in the first), tree-summed."""

    def __init__(self, linear: nn.Linear, chunk: int):
        super().__init__()
        self.slices = slices(linear.in_features, chunk)
        self.weights = nn.ParameterList([nn.Parameter(linear.weight.detach()[:, s].clone()) for s in self.slices])
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tree_sum([F.linear(x[..., s], w, self.bias if i == 0 else None)
                         for i, (s, w) in enumerate(zip(self.slices, self.weights))])


class SplitConv2d(nn.Module):
    """nn.Conv2d (groups 1) as convolutions over chunks of input channels (``chunk`` products each), tree-summed."""

    def __init__(self, conv: nn.Conv2d, chunk: int):
        super().__init__()
        taps = conv.kernel_size[0] * conv.kernel_size[1]
        self.slices = slices(conv.in_channels, max(1, chunk // taps))
        self.weights = nn.ParameterList([nn.Parameter(conv.weight.detach()[:, s].clone()) for s in self.slices])
        self.bias = None if conv.bias is None else nn.Parameter(conv.bias.detach().clone())
        self.stride, self.padding, self.dilation = conv.stride, conv.padding, conv.dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tree_sum([F.conv2d(x[:, s], w, self.bias if i == 0 else None, self.stride, self.padding,
                                  self.dilation) for i, (s, w) in enumerate(zip(self.slices, self.weights))])


def _long(module: nn.Module, chunk: int) -> bool:
    if isinstance(module, nn.Linear):
        return module.in_features > chunk
    if isinstance(module, nn.Conv2d) and module.groups == 1 and not isinstance(module.padding, str):
        return module.in_channels * module.kernel_size[0] * module.kernel_size[1] > chunk
    return False


@torch.no_grad()
def split_reductions(model: nn.Module, chunk: int) -> dict[str, int]:
    """In place: every Linear and Conv2d whose reduction exceeds ``chunk`` products is split, and each module with a
    ``split_k`` (the attentions' two matmuls, the norms' means) splits its own. Returns the counts by kind."""
    counts = {"linear": 0, "conv": 0, "matmul": 0}
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if _long(child, chunk):
                kind = "linear" if isinstance(child, nn.Linear) else "conv"
                setattr(parent, name, SplitLinear(child, chunk) if kind == "linear" else SplitConv2d(child, chunk))
                counts[kind] += 1
    for module in model.modules():
        if hasattr(module, "split_k"):  # attentions: their two matmuls
            module.split_k = chunk
            counts["matmul"] += 1
        elif hasattr(module, "split") and getattr(module, "avg", None) is not None:  # norms' means (LinearMeanNorm)
            if module.avg.shape[1] > chunk:
                module.split(chunk)
                counts["matmul"] += 1
    return counts
