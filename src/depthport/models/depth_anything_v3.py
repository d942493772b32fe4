"""Depth Anything 3 (monocular depth path): a DINOv2 encoder with QK-norm, 2-D RoPE and a camera token, and
the DualDPT head's depth branch. Built for one input shape; one view per image. Configurations of each size:
`configs.DA3_CONFIGS`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .configs import DA3_CONFIGS as CONFIGS
from .configs import DepthAnythingV3Config
from .dinov2 import DinoV2
from .dualdpt import DualDPTHead
from .layers import Block
from .rope import RopeAttention, RopeTables, token_positions

__all__ = ["CONFIGS", "CenteredNorm", "DA3Encoder", "DepthAnythingV3", "DepthAnythingV3Config", "RopeBlock"]


class CenteredNorm(nn.Module):
    """A LayerNorm written for export: (x - mean) * rsqrt(mean of squares + eps as one constant linear map),
    then gain and bias (8 ops; the converter expands nn.LayerNorm on rank-2 tokens to 16). Built by
    `rewrites.fold_layernorm` for the encoder's final norm, whose output feeds the head's LayerNorm and so
    cannot be folded into weights.
    """

    def __init__(self, norm: nn.LayerNorm):
        super().__init__()
        dim = norm.normalized_shape[0]
        self.register_buffer("avg", torch.full((1, dim), 1.0 / dim), persistent=False)
        self.register_buffer("eps", torch.tensor([norm.eps]), persistent=False)
        self.weight = nn.Parameter(norm.weight.detach().clone())
        self.bias = nn.Parameter(norm.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x - x.mean(dim=-1, keepdim=True)
        return d * torch.rsqrt(F.linear(d * d, self.avg, self.eps)) * self.weight + self.bias


class RopeBlock(Block):
    """A DINOv2 block whose attention is `RopeAttention`, with or without QK-norm and RoPE (LayerNorms and
    LayerScales as in `Block`). Every Depth Anything 3 block is one, so that all export as
    `SplitHeadRopeAttention`."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, eps: float, qk_norm: bool, rope: RopeTables | None):
        super().__init__(dim, heads, mlp_ratio, eps)
        self.attn = RopeAttention(dim, heads, qk_norm, rope)


class DA3Encoder(DinoV2):
    """DINOv2 with Depth Anything 3's changes, on one image's tokens (N, C), class token first.

    From ``alt_start`` the class token is replaced by the camera token (a concatenation, not an index
    assignment). RoPE positions are constants for the built grid: "local" blocks see each patch's (y, x),
    "global" ones (with one view) the same position for every patch. Each output is the last local block's
    tokens beside the final-normed tokens of its layer (2C channels), class token dropped.
    """

    def __init__(self, cfg: DepthAnythingV3Config, input_hw: tuple[int, int], pos_formula: str = "official"):
        super().__init__(cfg.vit, input_hw, pos_formula)
        self.da3 = cfg
        v = cfg.vit
        head_dim = v.dim // v.heads
        self.camera_token = nn.Parameter(torch.zeros(1, 2, v.dim))
        self.norm = nn.LayerNorm(v.dim, eps=cfg.norm_eps)
        self.rope_local = RopeTables(token_positions(self.grid_hw, same=False), head_dim, cfg.rope_base)
        self.rope_global = RopeTables(token_positions(self.grid_hw, same=True), head_dim, cfg.rope_base)
        for i in range(v.depth):
            rope = None
            if cfg.rope_start != -1 and i >= cfg.rope_start:
                rope = self.rope_global if cfg.is_global(i) else self.rope_local
            qk_norm = cfg.qknorm_start != -1 and i >= cfg.qknorm_start
            self.blocks[i] = RopeBlock(v.dim, v.heads, v.mlp_ratio, v.eps, qk_norm, rope)

    def stream_writes(self) -> tuple[list[nn.Module], list[torch.Tensor]]:
        """DINOv2's, and the camera token, which replaces the class token from ``alt_start``."""
        layers, tensors = super().stream_writes()
        return layers, tensors + [self.camera_token]

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """One image (1, 3, H, W) -> the four head inputs, each (gh*gw, 2C)."""
        if x.shape[0] != 1 or tuple(x.shape[-2:]) != self.input_hw:
            raise ValueError(f"model was built for (1, 3, {self.input_hw[0]}, {self.input_hw[1]}), got {tuple(x.shape)}")
        cfg = self.da3
        x = self.embed(x)
        local, outs = x, []
        for i, block in enumerate(self.blocks):
            if i == cfg.alt_start:
                x = torch.cat([self.camera_token[0, :1], x[1:]], dim=0)
            x = block(x)
            if not cfg.is_global(i):
                local = x
            if i in cfg.out_layers:
                outs.append(torch.cat([local, self.norm(x)], dim=-1)[1:])
        return outs


class DepthAnythingV3(nn.Module):
    """Image (1, 3, H, W), ImageNet-normalised unless folded -> depth (1, 1, H, W) [, confidence (1, 1, H, W)]."""

    def __init__(self, cfg: DepthAnythingV3Config, input_hw: tuple[int, int], pos_formula: str = "official",
                 confidence: bool = False):
        super().__init__()
        self.cfg = cfg
        self.encoder = DA3Encoder(cfg, input_hw, pos_formula)
        self.head = DualDPTHead(cfg.head, self.encoder.grid_hw, cfg.vit.patch, confidence)

    @property
    def input_hw(self) -> tuple[int, int]:
        return self.encoder.input_hw

    def forward(self, x: torch.Tensor):
        if x.shape[0] > 1:
            outs = [self(x[i : i + 1]) for i in range(x.shape[0])]
            if isinstance(outs[0], tuple):
                return tuple(torch.cat(parts) for parts in zip(*outs))
            return torch.cat(outs)
        return self.head(self.encoder(x))
