"""Depth Anything 3's monocular models (DA3Metric-Large, DA3Mono-Large): a plain DINOv2 encoder (no RoPE, QK-norm
or camera token; the official position-embedding resampling) and a DPT head ending in exp. Configurations:
`configs.DA3_MONO_CONFIGS`.

The upstream head also has a one-channel sky head, and the package's network then fills the pixels it calls sky
with the 99th percentile of the other pixels' depth (a data-dependent, randomly sampled quantile). Both are
outside the depth network and are not built here: the output is the depth head's own map.
"""

from __future__ import annotations

import torch
from torch import nn

from .configs import DA3_MONO_CONFIGS as CONFIGS
from .configs import DepthAnythingV3MonoConfig
from .depth_anything_v2 import DepthAnythingV2

__all__ = ["CONFIGS", "DepthAnythingV3Mono", "DepthAnythingV3MonoConfig"]


class DepthAnythingV3Mono(DepthAnythingV2):
    """Image (B, 3, H, W), ImageNet-normalised unless folded -> depth (B, 1, H, W) = exp(logit).

    The same modules as `DepthAnythingV2` (so every rewrite applies), with the package's final-norm epsilon.
    """

    def __init__(self, cfg: DepthAnythingV3MonoConfig, input_hw: tuple[int, int], pos_formula: str = "official"):
        super().__init__(cfg, input_hw, pos_formula)
        self.encoder.norm = nn.LayerNorm(cfg.vit.dim, eps=cfg.norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 1:
            return torch.cat([self(x[i : i + 1]) for i in range(x.shape[0])])
        return self.head(self.encoder.forward_intermediates(x, self.cfg.layers))[:, None]
