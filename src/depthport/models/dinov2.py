"""DINOv2 ViT encoder, built for one input shape so that the position embedding is a constant."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .configs import ViTConfig
from .layers import Block

POS_EMBED_FORMULAS = ("official", "transformers")


def resample_pos_embed(grid: torch.Tensor, out_hw: tuple[int, int], formula: str) -> torch.Tensor:
    """Bicubic resampling of a (1, C, g, g) position grid to out_hw, by one of the two upstream formulas.

    ``official`` is DINOv2's ``scale_factor=(n + 0.1) / g`` (used by the Depth Anything repos); ``transformers``
    passes ``size=``. Both upstreams skip resampling at the pretraining grid, so the formulas differ elsewhere only.
    """
    g = grid.shape[-1]
    if tuple(out_hw) == (g, g):
        return grid
    if formula == "official":
        scale = ((out_hw[0] + 0.1) / g, (out_hw[1] + 0.1) / g)
        out = F.interpolate(grid.float(), scale_factor=scale, mode="bicubic", align_corners=False)
    elif formula == "transformers":
        out = F.interpolate(grid.float(), size=out_hw, mode="bicubic", align_corners=False)
    else:
        raise ValueError(f"unknown position-embedding formula {formula!r}; choose from {POS_EMBED_FORMULAS}")
    if tuple(out.shape[-2:]) != tuple(out_hw):
        raise ValueError(f"resampling gave {tuple(out.shape[-2:])}, expected {out_hw}")
    return out


class DinoV2(nn.Module):
    """Patch embedding + class token + position embedding + pre-norm blocks.

    ``pos_embed`` holds the pretraining grid as checkpoints store it. ``rewrites.bake_pos_embed`` replaces the
    run-time resampling with a constant for the built input shape.
    """

    def __init__(self, cfg: ViTConfig, input_hw: tuple[int, int], pos_formula: str = "official"):
        super().__init__()
        if input_hw[0] % cfg.patch or input_hw[1] % cfg.patch:
            raise ValueError(f"input {input_hw[0]}x{input_hw[1]} is not a multiple of the patch size {cfg.patch}")
        self.cfg = cfg
        self.input_hw = tuple(input_hw)
        self.grid_hw = (input_hw[0] // cfg.patch, input_hw[1] // cfg.patch)
        self.pos_formula = pos_formula
        self.patch_embed = nn.Conv2d(3, cfg.dim, kernel_size=cfg.patch, stride=cfg.patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + cfg.pretrain_grid**2, cfg.dim))
        self.blocks = nn.ModuleList(Block(cfg.dim, cfg.heads, cfg.mlp_ratio, cfg.eps) for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(cfg.dim, eps=cfg.eps)
        self.register_buffer("baked_pos_embed", None, persistent=False)

    def stream_writes(self) -> tuple[list[nn.Module], list[torch.Tensor]]:
        """What writes the residual stream: the layers whose outputs are added to it (patch embedding, each block's
        attention projection and fc2) and the tensors added as they are (class token, position embeddings)."""
        layers = [self.patch_embed] + [m for b in self.blocks for m in (b.attn.proj, b.mlp.fc2)]
        tensors = [t for t in (self.cls_token, self.pos_embed, self.baked_pos_embed) if t is not None]
        return layers, tensors

    def position_embedding(self) -> torch.Tensor:
        if self.baked_pos_embed is not None:
            return self.baked_pos_embed
        g, dim = self.cfg.pretrain_grid, self.cfg.dim
        cls_pos, patch_pos = self.pos_embed[:, :1], self.pos_embed[:, 1:]
        grid = patch_pos.reshape(1, g, g, dim).permute(0, 3, 1, 2)
        patch_pos = resample_pos_embed(grid, self.grid_hw, self.pos_formula)
        return torch.cat([cls_pos, patch_pos.permute(0, 2, 3, 1).reshape(1, -1, dim)], dim=1)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """One image (1, 3, H, W) -> tokens (1 + N, C), class token first.

        The position embedding is added to the channels-last patch grid (rank 4) and the class token's share to
        the class token itself: the LiteRT GPU delegate computes a rank-2 constant ADD wrongly.
        """
        gh, gw = self.grid_hw
        pos = self.position_embedding().reshape(-1, self.cfg.dim)
        patches = self.patch_embed(x).permute(0, 2, 3, 1) + pos[1:].reshape(1, gh, gw, self.cfg.dim)
        return torch.cat([self.cls_token.reshape(1, -1) + pos[:1], patches.reshape(-1, self.cfg.dim)], dim=0)

    def forward_intermediates(self, x: torch.Tensor, indices: tuple[int, ...], norm: bool = True) -> list[torch.Tensor]:
        """One image's patch tokens (N, C) after the blocks in ``indices`` (0-based), final-normed unless norm=False.

        Tokens are kept 2-D (batch 1): every linear layer is then a rank-2 FULLY_CONNECTED with no reshapes.
        """
        if x.shape[0] != 1 or tuple(x.shape[-2:]) != self.input_hw:
            raise ValueError(f"model was built for (1, 3, {self.input_hw[0]}, {self.input_hw[1]}), got {tuple(x.shape)}")
        x = self.embed(x)
        outs = []
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i in indices:
                outs.append(self.norm(x[1:]) if norm else x[1:])
        return outs
