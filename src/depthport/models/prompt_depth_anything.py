"""Prompt Depth Anything (Lin et al., CVPR 2025): Depth Anything V2 whose DPT fusion blocks each add a branch fed
by a coarse metric depth map (the prompt: a phone's LiDAR or ToF depth), and whose sigmoid output is stretched back
to the prompt's depth range. Configurations: `configs.PROMPT_DA_CONFIGS`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .configs import PROMPT_DA_CONFIGS as CONFIGS
from .configs import DepthAnythingV2Config
from .dinov2 import DinoV2
from .dpt import DPTHead

__all__ = ["CONFIGS", "PromptDepthAnything", "normalise_prompt", "sample_prompt"]


def sample_prompt(prompt_hw: tuple[int, int]) -> torch.Tensor:
    """A (1, 1, h, w) prompt of 1 to 5 m with a range, for tracing and lowering (a flat one divides by zero)."""
    return torch.linspace(1.0, 5.0, prompt_hw[0] * prompt_hw[1]).reshape(1, 1, *prompt_hw)


def normalise_prompt(prompt: torch.Tensor, pooled: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(1, 1, h, w) depth in metres -> (its min-max normalisation to [0, 1], min, max-min), each (1, 1, 1, 1).

    Rank-4 reductions over H and W, as the GPU delegate takes them; upstream flattens the map first, which is
    the same minimum and maximum. ``pooled``: the same two values as max pooling over the whole map (of the map and
    of its negation), which XNNPACK runs and its min/max reductions are not offered to (exact)."""
    if pooled:
        window = tuple(prompt.shape[-2:])
        low = -F.max_pool2d(-prompt, window, window)  # the stride given: coremltools requires it
        span = F.max_pool2d(prompt, window, window) - low
    else:
        low = torch.amin(prompt, dim=(2, 3), keepdim=True)
        span = torch.amax(prompt, dim=(2, 3), keepdim=True) - low
    return (prompt - low) / span, low, span


class PromptDepthAnything(nn.Module):
    """(image (1, 3, H, W), prompt depth (1, 1, h, w) in metres) -> metric depth (1, H, W), between the prompt's
    minimum and maximum."""

    def __init__(self, cfg: DepthAnythingV2Config, input_hw: tuple[int, int], prompt_hw: tuple[int, int],
                 pos_formula: str = "transformers"):
        super().__init__()
        self.cfg, self.prompt_hw = cfg, tuple(prompt_hw)
        self.range_by_pooling = False  # ExecuTorch's backend form sets it (``normalise_prompt(pooled=True)``)
        self.encoder = DinoV2(cfg.vit, input_hw, pos_formula)
        self.head = DPTHead(cfg.dpt, self.encoder.grid_hw, cfg.vit.patch, self.prompt_hw)

    @property
    def input_hw(self) -> tuple[int, int]:
        return self.encoder.input_hw

    def forward(self, image: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        if image.shape[0] > 1:
            return torch.cat([self(image[i : i + 1], prompt[i : i + 1]) for i in range(image.shape[0])])
        unit, low, span = normalise_prompt(prompt, self.range_by_pooling)
        depth = self.head(self.encoder.forward_intermediates(image, self.cfg.layers), unit)
        return depth * span.reshape(1, 1, 1) + low.reshape(1, 1, 1)
