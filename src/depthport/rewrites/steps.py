"""The rewrite steps. Each takes a built, loaded model and changes it in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import nn

from ..fp16.safe import fp16_safe_attention, fp16_safe_norm, fp16_safe_stream
from ..models.depth_anything_v2 import DepthAnythingV2
from ..models.depth_anything_v3 import CenteredNorm
from ..models.dinov2 import DinoV2
from ..models.dpt import FusionBlock
from ..models.layers import Attention, Block, DeconvAsShuffle, Resize, ScaleNorm
from ..models.rope import RopeAttention, SplitHeadRopeAttention
from ..preprocess import IMAGENET_MEAN, IMAGENET_STD


@dataclass(frozen=True)
class Rewrite:
    name: str
    fn: Callable[[nn.Module], None]
    exact: bool
    summary: str
    requires: tuple[str, ...] = ()


def _encoders(model: nn.Module) -> list[DinoV2]:
    return [m for m in model.modules() if isinstance(m, DinoV2)]


@torch.no_grad()
def bake_pos_embed(model: nn.Module) -> None:
    for enc in _encoders(model):
        enc.baked_pos_embed = enc.position_embedding().detach().clone()


@torch.no_grad()
def fold_layerscale(model: nn.Module) -> None:
    for block in (m for m in model.modules() if isinstance(m, Block)):
        for ls_name, linear in (("ls1", block.attn.proj), ("ls2", block.mlp.fc2)):
            ls = getattr(block, ls_name)
            if isinstance(ls, nn.Identity):
                continue
            linear.weight.mul_(ls.gamma[:, None])
            linear.bias.mul_(ls.gamma)
            setattr(block, ls_name, nn.Identity())


@torch.no_grad()
def fold_attention_scale(model: nn.Module) -> None:
    for attn in (m for m in model.modules() if isinstance(m, Attention)):
        attn.q.weight.mul_(attn.scale)
        if attn.q.bias is not None:
            attn.q.bias.mul_(attn.scale)
        attn.scale = 1.0
    for attn in (m for m in model.modules() if isinstance(m, RopeAttention)):
        # With QK-norm the scale goes into the norm's gain and bias (RoPE is linear); else into Q as above.
        target = attn.q_norm if isinstance(attn.q_norm, nn.LayerNorm) else attn.q
        target.weight.mul_(attn.scale)
        target.bias.mul_(attn.scale)
        attn.scale = 1.0


def _fold_norm_into(norm: nn.LayerNorm, consumers: list[nn.Module]) -> ScaleNorm:
    """LayerNorm(x) feeding consumers W, b (Linear or 1x1 Conv2d) -> ScaleNorm(x) feeding A_c, b + W @ beta.

    A = W diag(gamma) and A_c is A with each row's mean removed, so that A_c x = A (x - mean(x)).
    """
    g, beta = norm.weight.detach(), norm.bias.detach()
    for layer in consumers:
        w = layer.weight.view(layer.weight.shape[0], -1)
        extra = w @ beta
        w.mul_(g)
        w.sub_(w.mean(dim=1, keepdim=True))
        if layer.bias is None:
            layer.bias = nn.Parameter(extra)
        else:
            layer.bias.add_(extra)
    return ScaleNorm(norm.normalized_shape[0], norm.eps)


@torch.no_grad()
def fold_layernorm(model: nn.Module) -> None:
    for block in (m for m in model.modules() if isinstance(m, Block)):
        if isinstance(block.norm1, nn.LayerNorm):
            block.norm1 = _fold_norm_into(block.norm1, [block.attn.q, block.attn.k, block.attn.v])
        if isinstance(block.norm2, nn.LayerNorm):
            block.norm2 = _fold_norm_into(block.norm2, [block.mlp.fc1])
    head = getattr(model, "head", None)
    if isinstance(getattr(head, "norm", None), nn.LayerNorm):
        # Depth Anything 3: the head's own norm feeds the projections; the encoder's norm feeds the head's.
        head.norm = _fold_norm_into(head.norm, list(head.projects))
        for enc in _encoders(model):
            if isinstance(enc.norm, nn.LayerNorm):
                enc.norm = CenteredNorm(enc.norm)
        return
    for enc in _encoders(model):
        if isinstance(enc.norm, nn.LayerNorm) and head is not None and hasattr(head, "projects"):
            enc.norm = _fold_norm_into(enc.norm, list(head.projects))


@torch.no_grad()
def head_major_qkv(model: nn.Module) -> None:
    for block in (m for m in model.modules() if isinstance(m, Block)):
        if isinstance(block.attn, RopeAttention):
            block.attn = SplitHeadRopeAttention(block.attn)


def _center_rows(layer: nn.Module) -> None:
    """Make a layer's output zero-mean over its output channels (rows of the weight, and the bias)."""
    layer.weight.sub_(layer.weight.mean(dim=0, keepdim=True))
    if layer.bias is not None:
        layer.bias.sub_(layer.bias.mean())


@torch.no_grad()
def center_residual_stream(model: nn.Module) -> None:
    """Depth Anything V2 reads its residual stream only through LayerNorms, which ignore a per-token shift:
    every write to the stream (embedding, attention and MLP outputs) is made zero-mean over channels, and the
    norms drop their own mean subtraction."""
    if not isinstance(model, DepthAnythingV2):
        return
    layers, tensors = model.encoder.stream_writes()
    for layer in layers:
        _center_rows(layer)
    for t in tensors:
        t.sub_(t.mean(dim=-1, keepdim=True))
    for norm in (m for m in model.modules() if isinstance(m, ScaleNorm)):
        norm.centered = True


@torch.no_grad()
def deconv_to_shuffle(model: nn.Module) -> None:
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.ConvTranspose2d):
                setattr(parent, name, DeconvAsShuffle(child))


def _replace_resizes(model: nn.Module, mode: str, chunks: int) -> None:
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, Resize):
                setattr(parent, name, Resize(child.in_hw, child.out_hw, mode, _chunks_for(child, chunks),
                                             child.align_corners))


def _chunks_for(resize: Resize, chunks: int) -> int:
    """Band blocks only pay off on large maps; small ones stay a single matrix product."""
    return chunks if max(resize.out_hw) >= 256 else 1


def conv_before_resize(model: nn.Module) -> None:
    """Each DPT fusion block's 1x1 out_conv runs before its bilinear resize instead of after.

    The two commute: the conv mixes channels pixel by pixel and every row of an interpolation matrix sums to 1,
    so the bias passes through unchanged. The conv then works on a quarter of the pixels.
    """
    for block in (m for m in model.modules() if isinstance(m, FusionBlock)):
        block.conv_first = True


def exact_resize(model: nn.Module, chunks: int = 4) -> None:
    _replace_resizes(model, "exact", chunks)


def approx_resize(model: nn.Module) -> None:
    _replace_resizes(model, "approx", 1)


@torch.no_grad()
def fold_input_normalization(model: nn.Module) -> None:
    """Input becomes raw RGB in 0..1: (x - mean) / std is folded into the patch-embedding conv."""
    mean = torch.tensor(IMAGENET_MEAN)
    std = torch.tensor(IMAGENET_STD)
    for enc in _encoders(model):
        conv = enc.patch_embed
        conv.bias.sub_((conv.weight * (mean / std)[None, :, None, None]).sum(dim=(1, 2, 3)))
        conv.weight.div_(std[None, :, None, None])


REWRITES: dict[str, Rewrite] = {
    r.name: r
    for r in [
        Rewrite("bake_pos_embed", bake_pos_embed, True,
                "position embedding resampled once for the export shape, stored as a constant (no GATHER_ND/BROADCAST_TO)"),
        Rewrite("fold_layerscale", fold_layerscale, True, "LayerScale gamma folded into attn.proj and mlp.fc2"),
        Rewrite("fold_attention_scale", fold_attention_scale, True,
                "1/sqrt(head_dim) folded into the Q weights and bias (with QK-norm: into the Q norm's gain and bias)"),
        Rewrite("fold_layernorm", fold_layernorm, True,
                "LayerNorm mean-centering, gain and bias folded into the Q/K/V, fc1 and DPT projection weights; "
                "the norm keeps only x*rsqrt(var+eps), 6 ops instead of 12"),
        Rewrite("center_residual_stream", center_residual_stream, True,
                "every write to the residual stream made zero-mean over channels (LayerNorm ignores the shift), "
                "so each norm skips its mean: 4 ops instead of 6", requires=("fold_layerscale",)),
        Rewrite("fp16_safe_stream", fp16_safe_stream, True,
                "Depth Anything V2 and 3: the residual stream carried k times smaller (k = power of two near sqrt(C)), "
                "folded into every write to it, the norms' epsilon / k^2: the same FP32 output bit for bit and no "
                "op added; in FP16 the norms' squares stay finite up to |x| < 256k instead of 256",
                requires=("fold_layernorm",)),
        Rewrite("head_major_qkv", head_major_qkv, True,
                "Depth Anything 3 attention with QK-norm and RoPE: K bias dropped (softmax is shift-invariant), "
                "V bias folded into the output projection, QK-norm centering folded into the Q/K weights and "
                "RoPE's rotate-half a constant matmul"),
        Rewrite("deconv_to_shuffle", deconv_to_shuffle, True,
                "ConvTranspose2d (kernel = stride) as 1x1 conv + rank-4 depth-to-space (no TRANSPOSE_CONV)"),
        Rewrite("conv_before_resize", conv_before_resize, True,
                "each DPT fusion block's 1x1 out_conv moved before its 2x bilinear resize (they commute: "
                "interpolation rows sum to 1), so it runs on a quarter of the pixels"),
        Rewrite("exact_resize", exact_resize, True,
                "align_corners=True bilinear resizes as banded constant matrix products (no RESIZE op)"),
        Rewrite("approx_resize", approx_resize, False,
                "align_corners=True resizes replaced by align_corners=False RESIZE_BILINEAR (approximation)"),
        Rewrite("fold_input_normalization", fold_input_normalization, True,
                "ImageNet mean/std folded into the patch-embedding conv: input is RGB in 0..1"),
        Rewrite("fp16_safe_norm", fp16_safe_norm, True,
                "folded LayerNorm variance computed on x/k (k = power of two near sqrt(C)): d*d stays finite in "
                "FP16 up to |d| < 256k instead of 256; identical in FP32, one extra MUL per norm (none for the "
                "norms fp16_safe_stream already guards)",
                requires=("fold_layernorm",)),
        Rewrite("fp16_safe_attention", fp16_safe_attention, True,
                "Q and K computed 16x smaller (folded into their weights), logits restored inside the softmax as "
                "softmax(256 max(z - max z, -128)): the same in FP32, Q·Kᵀ finite in FP16 up to 1.68e7 instead of "
                "65504; a REDUCE_MAX, SUB, MAXIMUM and MUL per attention", requires=("fold_attention_scale",)),
    ]
}


FP16_SAFE = {"norm": "fp16_safe_norm", "attention": "fp16_safe_attention"}


def default_rewrites(resize: str = "exact", fold_normalization: bool = False, fp16_safe: tuple[str, ...] = ()) -> list[str]:
    """The export's rewrites in order; ``fp16_safe`` names the FP16 guards to add, of ``FP16_SAFE`` ("norm":
    ``fp16_safe_norm``, "attention": ``fp16_safe_attention``; see ``depthport.fp16.safe``)."""
    if resize not in ("exact", "approx"):
        raise ValueError(f"--resize must be exact or approx, not {resize!r}")
    names = ["bake_pos_embed", "fold_layerscale", "fold_attention_scale", "fold_layernorm", "center_residual_stream",
             "fp16_safe_stream", "head_major_qkv", "deconv_to_shuffle", "conv_before_resize", f"{resize}_resize"]
    unknown = set(fp16_safe) - set(FP16_SAFE)
    if unknown:
        raise ValueError(f"unknown FP16 guard(s) {', '.join(sorted(unknown))}; known: {', '.join(FP16_SAFE)}")
    return names + (["fold_input_normalization"] if fold_normalization else []) + [
        FP16_SAFE[g] for g in FP16_SAFE if g in fp16_safe]


def applied(model: nn.Module, names: list[str]) -> Iterator[str]:
    """Apply ``names`` to ``model`` in order, yielding each name once it has been applied (the rewrite ledger
    looks at the model between steps)."""
    for i, name in enumerate(names):
        if name not in REWRITES:
            raise ValueError(f"unknown rewrite {name!r}; known: {', '.join(REWRITES)}")
        missing = [r for r in REWRITES[name].requires if r not in names[:i]]
        if missing:
            raise ValueError(f"rewrite {name} needs {', '.join(missing)} applied before it")
        REWRITES[name].fn(model)
        yield name


def apply(model: nn.Module, names: list[str]) -> nn.Module:
    for _ in applied(model, names):
        pass
    return model
