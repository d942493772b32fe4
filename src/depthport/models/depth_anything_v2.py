"""Depth Anything V2: a DINOv2 encoder and a DPT head (configurations of each size: `configs.DA2_CONFIGS`)."""

from __future__ import annotations

import torch
from torch import nn

from .configs import DA2_CONFIGS as CONFIGS
from .configs import DepthAnythingV2Config
from .dinov2 import DinoV2
from .dpt import DPTHead

__all__ = ["CONFIGS", "DepthAnythingV2", "DepthAnythingV2Config"]


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
