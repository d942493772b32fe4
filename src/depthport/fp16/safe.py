"""FP16-safe rewrite of the folded LayerNorm: the variance is computed on x / k.

``ScaleNorm`` computes ``x * rsqrt(mean(d * d) + eps)`` with ``d = x - mean(x)`` (``d = x`` when the
residual stream is already centered); in FP16, ``d * d`` overflows as soon as |d| > 256.
``Fp16SafeScaleNorm`` first multiplies x by 1/k, with k a power of two near sqrt(C):

    xs = x / k;  d = xs - mean(xs) (or xs);  y = xs * rsqrt(mean(d * d) + eps / k^2)

which is the same number in FP32, bit for bit (scaling by a power of two is exact, and rsqrt(v / k^2) is
exactly k * rsqrt(v) for k^2 an even power of two), while ``d * d`` now overflows only past |d| > 256 k
(4096 for C = 384). It costs one MUL per norm. ``depthport.rewrites`` lists it as the rewrite
``fp16_safe_norm``; it acts on ScaleNorm, so it goes after ``fold_layernorm``.

``fp16_safe_stream`` does the same for every norm of a Depth Anything V2 or 3 encoder at no cost: the whole residual
stream is carried k times smaller. Every write to it (patch embedding, class and position embeddings, attention and
MLP outputs) has 1/k folded into its weights, and its readers, all of them norms, take eps / k^2. Scaling by a
power of two is exact, so the FP32 output is the same bit for bit, the graph has the same ops, and in FP16 the
norms' squared inputs stay finite up to |x| < 256 k (4096 for C = 384, 8192 for C = 1024), where trained DINOv2
backbones carry residual channels several hundred large. Values below 2^-14 k become FP16 subnormals: runtimes that
flush them to zero (XNNPACK on ARM) lose the stream's small writes, accumulated one FP16 product at a time (DA-V2-Small
140x182 on ARM, split file: 5.7e-3 instead of 1.4e-3), so the XNNPACK files undo it (``full_scale_stream``) and
scale inside their norms instead.

``fp16_safe_attention`` guards the attention logits. Q·Kᵀ between high-norm tokens of trained backbones can pass
65504 (inf, then NaN in softmax). The rewrite computes Q and K each ``ATTENTION_SHIFT`` (16) times smaller
(a power of two folded into their weights: exact) and restores the logits inside the softmax as
softmax(256 max(z - max z, -128)): max subtraction is what softmax does anyway, scaling by a power of two is
exact, and a logit raised from below max - 32768 to it has exp 0 in FP32 either way, so the FP32 result is the
same; in FP16 the logits z stay finite up to |Q·Kᵀ| < 65504 x 256 = 1.68e7 (the activation bound up to which
the file is safe), and no intermediate passes 32768. It costs a REDUCE_MAX, a SUB, a MAXIMUM and a MUL per
attention.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..models.depth_anything_v2 import DepthAnythingV2
from ..models.depth_anything_v3 import CenteredNorm, DepthAnythingV3
from ..models.layers import LOGIT_GUARD, Attention, ScaleNorm
from ..models.rope import SplitHeadRopeAttention


def default_scale(dim: int) -> int:
    """The power of two nearest sqrt(dim)."""
    return 2 ** max(0, round(math.log2(math.sqrt(dim))))


class Fp16SafeScaleNorm(nn.Module):
    def __init__(self, norm: ScaleNorm, k: int | None = None):
        super().__init__()
        dim = norm.avg.shape[1]
        self.k = k or default_scale(dim)
        if self.k & (self.k - 1):
            raise ValueError(f"the scale must be a power of two, not {self.k}")
        self.centered = getattr(norm, "centered", False)
        self.register_buffer("avg", norm.avg.detach().clone(), persistent=False)
        self.register_buffer("eps", norm.eps.detach() / self.k**2, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xs = x * (1.0 / self.k)
        d = xs if self.centered else xs - xs.mean(dim=-1, keepdim=True)
        return xs * torch.rsqrt(F.linear(d * d, self.avg, self.eps))


@torch.no_grad()
def fp16_safe_norm(model: nn.Module) -> None:
    """Norms that ``fp16_safe_stream`` already reads k times smaller are left alone: scaling them again would
    gain no range and push their squares towards FP16's subnormals."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, ScaleNorm) and not getattr(child, "stream_scale", None):
                setattr(parent, name, Fp16SafeScaleNorm(child))
                replaced += 1
    if not replaced and any(isinstance(m, nn.LayerNorm) for m in model.modules()):
        raise ValueError("fp16_safe_norm acts on folded norms: apply fold_layernorm first")


def _stream(model: nn.Module) -> tuple[list, list[torch.Tensor]] | None:
    """(the norms that read a Depth Anything V2 or 3 encoder's residual stream, the tensors that write it), or None
    for other models."""
    if isinstance(model, DepthAnythingV2):
        enc = model.encoder
        readers = [enc.norm]
    elif isinstance(model, DepthAnythingV3):
        # Its head reads the last local block's raw tokens beside the final norm's output: that norm's gain and
        # bias are scaled too, so the head's own norm sees one stream k times smaller.
        enc = model.encoder
        readers = [model.head.norm]
    else:
        return None
    norms = [n for b in enc.blocks for n in (b.norm1, b.norm2)] + readers
    if not all(isinstance(n, ScaleNorm) for n in norms):
        raise ValueError("fp16_safe_stream moves the norms' epsilon: apply fold_layernorm first")
    layers, tensors = enc.stream_writes()
    if isinstance(enc.norm, CenteredNorm):
        norms.append(enc.norm)
        tensors += [enc.norm.weight, enc.norm.bias]
    return norms, tensors + [p for m in layers for p in (m.weight, m.bias) if p is not None]


def _rescale_stream(norms: list, writes: list[torch.Tensor], factor: float) -> None:
    """The stream ``factor`` times larger: its writes multiplied by it, its norms' epsilon by its square."""
    for t in writes:
        t.mul_(factor)
    for norm in norms:
        norm.eps.mul_(factor * factor)


@torch.no_grad()
def fp16_safe_stream(model: nn.Module) -> None:
    found = _stream(model)
    if found is None:
        return
    norms, writes = found
    k = default_scale(model.encoder.cfg.dim)
    _rescale_stream(norms, writes, 1.0 / k)
    for norm in norms:
        norm.stream_scale = k


@torch.no_grad()
def full_scale_stream(model: nn.Module) -> int:
    """Undo ``fp16_safe_stream`` (exact: a power of two): the stream at its own scale again, for runtimes that flush
    FP16 subnormals to zero (XNNPACK on ARM), where a stream k times smaller loses its small writes. Their norms
    then scale their input themselves (``export.executorch.LinearMeanNorm``). Returns k (1: nothing to undo)."""
    found = _stream(model)
    if found is None:
        return 1
    norms, writes = found
    k = getattr(norms[0], "stream_scale", 1)
    if k == 1:
        return 1
    _rescale_stream(norms, writes, float(k))
    for norm in norms:
        del norm.stream_scale
    return k


ATTENTION_SHIFT = math.isqrt(int(LOGIT_GUARD))  # Q and K are each computed this much smaller (16)


@torch.no_grad()
def fp16_safe_attention(model: nn.Module) -> None:
    shift = 1.0 / ATTENTION_SHIFT
    found = 0
    for attn in model.modules():
        if isinstance(attn, Attention):
            if attn.scale != 1.0:
                raise ValueError("fp16_safe_attention scales the folded Q: apply fold_attention_scale first")
            paths = [attn.q, attn.k]
        elif isinstance(attn, SplitHeadRopeAttention):
            paths = [p.gain if p.normed else p.proj for p in (attn.q, attn.k)]
            paths += [p.shift for p in (attn.q, attn.k) if p.normed]
        else:
            continue
        for part in paths:
            for t in (part.weight, part.bias) if isinstance(part, nn.Linear) else (part,):
                if t is not None:
                    t.mul_(shift)
        attn.register_buffer("guard", torch.tensor([LOGIT_GUARD]), persistent=False)
        attn.guarded = True
        found += 1
    if not found:
        raise ValueError("fp16_safe_attention found no attention to guard")
