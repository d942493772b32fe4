"""Short FP16 reductions for XNNPACK: every long dot product cut into chunks whose partial results are summed in
float32.

XNNPACK's f16 GEMM, convolution and batch-matmul kernels accumulate in FP16, one fused multiply-add per product
along the whole reduction (``fp16.kernels``), so their rounding error grows with its length K (about
u sqrt(K/2), u = 2^-11). Its f16 mean, however, accumulates in float32 and rounds once (the ``f16_f32acc``
reduce kernels). So each reduction is computed as one batched product over G chunks of at most ``chunk``
products, giving G partial results, and these are summed by ``models.layers.group_sum`` (a mean of G x the parts): FP16
rounding then grows with the chunk, not with K. Per kind of op:
- a Linear (T, K) -> (T, N): one batched matmul (G, T, c) @ (G, c, N);
- a Conv2d (groups 1): one grouped convolution, G groups of the input channels (``chunk`` counts channels x
  kernel taps), each producing all outputs; a convolution with at most ``FEW_OUTPUTS`` output maps (a depth
  head's last: depth, and DA3's confidence) one input channel per group, whose partial maps then cost at most
  twice its input;
- a patchifying Conv2d (kernel = stride, no padding: the patch embedding), where one input channel is already
  more than ``chunk`` products (196 for a 14x14 patch): the patches as rows of a split Linear;
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
from .fp32_head import kept_modules


# A convolution with this many output maps or fewer is split into one input channel per group.
FEW_OUTPUTS = 2


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


class SplitPatchConv(nn.Module):
    """A patchifying nn.Conv2d (kernel = stride, no padding, groups 1) as what it computes, a Linear over each
    patch's C x p x q values, split as ``SplitLinear``: cutting whole input channels cannot shorten a reduction
    of 196 products per channel."""

    def __init__(self, conv: nn.Conv2d, chunk: int):
        super().__init__()
        self.cout, (self.p, self.q) = conv.out_channels, conv.kernel_size
        linear = nn.Linear(conv.in_channels * self.p * self.q, self.cout, bias=conv.bias is not None)
        linear.weight.data = conv.weight.detach().reshape(self.cout, -1).clone()
        if conv.bias is not None:
            linear.bias.data = conv.bias.detach().clone()
        self.linear = SplitLinear(linear, chunk)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, hp, wq = x.shape
        h, w = hp // self.p, wq // self.q
        if (hp, wq) != (h * self.p, w * self.q):  # Conv2d drops the rows and columns no patch covers
            x = x[:, :, : h * self.p, : w * self.q]
        x = x.reshape(b, c, h, self.p, w, self.q)
        y = self.linear(x.permute(0, 2, 4, 1, 3, 5).reshape(b * h * w, c * self.p * self.q))
        return y.reshape(b, h, w, self.cout).permute(0, 3, 1, 2)


def _patchifies(conv: nn.Conv2d) -> bool:
    return (conv.groups == 1 and tuple(conv.stride) == tuple(conv.kernel_size) and tuple(conv.dilation) == (1, 1)
            and not isinstance(conv.padding, str) and tuple(conv.padding) == (0, 0))


def _split_conv(conv: nn.Conv2d, chunk: int, linear_chunk: int) -> nn.Module:
    taps = conv.kernel_size[0] * conv.kernel_size[1]
    if taps > chunk and _patchifies(conv):
        return SplitPatchConv(conv, linear_chunk)
    return SplitConv2d(conv, taps if conv.out_channels <= FEW_OUTPUTS else chunk)


def _spatial(module: nn.Module) -> bool:
    """A convolution with more than one tap; a 1x1 convolution is a Linear over channels, split as one."""
    return isinstance(module, nn.Conv2d) and module.kernel_size[0] * module.kernel_size[1] > 1


def _long(module: nn.Module, chunk: int) -> bool:
    if isinstance(module, nn.Linear):
        return module.in_features > chunk
    if isinstance(module, nn.Conv2d) and module.groups == 1 and not isinstance(module.padding, str):
        if module.out_channels <= FEW_OUTPUTS:
            return module.in_channels > 1
        return module.in_channels * module.kernel_size[0] * module.kernel_size[1] > chunk
    return False


def depth_channels_alone(model: nn.Module) -> None:
    """DA3's head: its last convolution's depth channel as a module of its own (``depth_only``, exact), so that a
    rewrite of the module sees what is computed: the head otherwise slices that convolution's weights itself, a
    weight computed at run time, which XNNPACK leaves to a portable convolution."""
    for head in [m for m in model.modules() if hasattr(m, "depth_only")]:
        head.depth_only()


@torch.no_grad()
def split_reductions(model: nn.Module, chunk: int, conv_chunk: int | None = None) -> dict[str, int]:
    """In place: every Linear and 1x1 Conv2d whose reduction exceeds ``chunk`` products and every larger Conv2d whose
    reduction exceeds ``conv_chunk`` (default ``chunk``; 0: those kept whole) is split, each module with a
    ``split_k`` (the attentions' two matmuls) splits its own, and each norm with a ``grouped_mean`` takes its means
    as a float32-accumulated mean; a module kept in FP32 (``fp32_head``) stays whole. Returns the counts by kind."""
    counts = {"linear": 0, "conv": 0, "matmul": 0, "mean": 0}
    depth_channels_alone(model)
    kept = kept_modules(model)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            limit = conv_chunk if _spatial(child) and conv_chunk is not None else chunk
            if limit and _long(child, limit) and id(child) not in kept:
                kind = "linear" if isinstance(child, nn.Linear) else "conv"
                setattr(parent, name, SplitLinear(child, limit) if kind == "linear" else _split_conv(child, limit, chunk))
                counts[kind] += 1
    for module in (m for m in model.modules() if id(m) not in kept):
        if hasattr(module, "split_k"):  # attentions: their two matmuls
            module.split_k = chunk
            counts["matmul"] += 1
        elif hasattr(module, "grouped_mean"):  # norms (LinearMeanNorm)
            module.grouped_mean = True
            counts["mean"] += 1
    return counts
