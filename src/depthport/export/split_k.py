"""Short FP16 reductions for XNNPACK: every long dot product cut into chunks whose partial results are summed in
float32.

XNNPACK's f16 GEMM, convolution and batch-matmul kernels accumulate in FP16, one fused multiply-add per product
along the whole reduction (``fp16.kernels``), so their rounding error grows with its length K (about
u sqrt(K/2), u = 2^-11). Its f16 mean, however, accumulates in float32 and rounds once (the ``f16_f32acc``
reduce kernels). So each reduction is computed as one batched product over G chunks of at most ``chunk``
products, giving G partial results, and these are summed by ``models.layers.group_sum`` (G times a mean): FP16
rounding then grows with the chunk, not with K. Per kind of op:
- a Linear (T, K) -> (T, N): one batched matmul (G, T, c) @ (G, c, N);
- a Conv2d (groups 1): one grouped convolution, G groups of the input channels (``chunk`` counts channels x
  kernel taps), each producing all outputs;
- the attention's Q·Kᵀ (K = head dim) and attention x V (K = tokens): ``models.layers.matmul_split``;
- the norms' means: a rank-4 mean (float32 accumulation) instead of a (1, C) linear.

In exact arithmetic nothing changes; in float32 the result differs from the unsplit model by reassociation only.
The cost is memory traffic: every split op writes G partial results where it wrote one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..models.layers import chunking, group_sum


class SplitLinear(nn.Module):
    """nn.Linear as one batched matmul over chunks of its input features, the partial results summed by
    ``group_sum``; the bias added after."""

    def __init__(self, linear: nn.Linear, chunk: int):
        super().__init__()
        self.k, self.n = linear.in_features, linear.out_features
        self.groups, self.size, self.pad = chunking(self.k, chunk)
        w = F.pad(linear.weight.detach().t(), (0, 0, 0, self.pad))
        self.weight = nn.Parameter(w.reshape(self.groups, self.size, self.n).clone())
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x = x.reshape(-1, self.k)
        if self.pad:
            x = F.pad(x, (0, self.pad))
        parts = torch.bmm(x.reshape(x.shape[0], self.groups, self.size).transpose(0, 1), self.weight)
        y = group_sum(parts)
        return (y if self.bias is None else y + self.bias).reshape(*lead, self.n)


class SplitConv2d(nn.Module):
    """nn.Conv2d (groups 1) as one grouped convolution: G groups of input channels, each group's convolution
    producing every output channel, the G partial maps summed by ``group_sum``; the bias added after."""

    def __init__(self, conv: nn.Conv2d, chunk: int):
        super().__init__()
        taps = conv.kernel_size[0] * conv.kernel_size[1]
        cout, cin = conv.out_channels, conv.in_channels
        self.groups, size, self.pad = chunking(cin, max(1, chunk // taps))
        w = F.pad(conv.weight.detach(), (0, 0, 0, 0, 0, self.pad))  # (Cout, G * size, kh, kw)
        w = w.reshape(cout, self.groups, size, *conv.kernel_size).transpose(0, 1)
        self.weight = nn.Parameter(w.reshape(self.groups * cout, size, *conv.kernel_size).clone())
        self.bias = None if conv.bias is None else nn.Parameter(conv.bias.detach().reshape(1, cout, 1, 1).clone())
        self.cout = cout
        self.stride, self.padding, self.dilation = conv.stride, conv.padding, conv.dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pad:
            x = F.pad(x, (0, 0, 0, 0, 0, self.pad))
        parts = F.conv2d(x, self.weight, None, self.stride, self.padding, self.dilation, self.groups)
        y = group_sum(parts.reshape(self.groups, 1, self.cout, *parts.shape[2:]))
        return y if self.bias is None else y + self.bias


def _long(module: nn.Module, chunk: int) -> bool:
    if isinstance(module, nn.Linear):
        return module.in_features > chunk
    if isinstance(module, nn.Conv2d) and module.groups == 1 and not isinstance(module.padding, str):
        return module.in_channels * module.kernel_size[0] * module.kernel_size[1] > chunk
    return False


@torch.no_grad()
def split_reductions(model: nn.Module, chunk: int, conv_chunk: int | None = None) -> dict[str, int]:
    """In place: every Linear whose reduction exceeds ``chunk`` products and every Conv2d whose reduction exceeds
    ``conv_chunk`` (default ``chunk``; 0: convolutions kept whole) is split, each module with a
    ``split_k`` (the attentions' two matmuls) splits its own, and each norm with a ``grouped_mean`` takes its means
    as a float32-accumulated mean. Returns the counts by kind."""
    counts = {"linear": 0, "conv": 0, "matmul": 0, "mean": 0}
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            limit = (conv_chunk if conv_chunk is not None else chunk) if isinstance(child, nn.Conv2d) else chunk
            if limit and _long(child, limit):
                kind = "linear" if isinstance(child, nn.Linear) else "conv"
                setattr(parent, name, SplitLinear(child, limit) if kind == "linear" else SplitConv2d(child, limit))
                counts[kind] += 1
    for module in model.modules():
        if hasattr(module, "split_k"):  # attentions: their two matmuls
            module.split_k = chunk
            counts["matmul"] += 1
        elif hasattr(module, "grouped_mean"):  # norms (LinearMeanNorm)
            module.grouped_mean = True
            counts["mean"] += 1
    return counts
