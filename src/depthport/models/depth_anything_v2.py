"""Depth Anything V2: a DINOv2 encoder and a DPT head, with the configurations of each released size."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .dinov2 import DinoV2, ViTConfig
from .dpt import DPTConfig, DPTHead


@dataclass(frozen=True)
class DepthAnythingV2Config:
    vit: ViTConfig
    dpt: DPTConfig
    layers: tuple[int, int, int, int]


CONFIGS = {
    "small": DepthAnythingV2Config(ViTConfig(384, 12, 6), DPTConfig(384, (48, 96, 192, 384), 64), (2, 5, 8, 11)),
    "base": DepthAnythingV2Config(ViTConfig(768, 12, 12), DPTConfig(768, (96, 192, 384, 768), 128), (2, 5, 8, 11)),
    "large": DepthAnythingV2Config(
        ViTConfig(1024, 24, 16), DPTConfig(1024, (256, 512, 1024, 1024), 256), (4, 11, 17, 23)
    ),
    # The real architecture at toy width and depth, for tests.
    "tiny": DepthAnythingV2Config(
        ViTConfig(32, 4, 2, pretrain_grid=4), DPTConfig(32, (8, 16, 24, 32), 16, head_hidden=8), (0, 1, 2, 3)
    ),
}


class DepthAnythingV2(nn.Module):
    """Image (B, 3, H, W), ImageNet-normalised unless the normalisation was folded in -> depth (B, H, W)."""

    def __init__(self, cfg: DepthAnythingV2Config, input_hw: tuple[int, int], pos_formula: str = "official"):
        super().__init__()
        self.cfg = cfg
        self.encoder = DinoV2(cfg.vit, input_hw, pos_formula)
        self.head = DPTHead(cfg.dpt, self.encoder.grid_hw, cfg.vit.patch)

    @property
    def input_hw(self) -> tuple[int, int]:
        return self.encoder.input_hw

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 1:
            return torch.cat([self(x[i : i + 1]) for i in range(x.shape[0])])
        return self.head(self.encoder.forward_intermediates(x, self.cfg.layers))
