"""DPT head of Depth Anything V2: reassemble four token maps, fuse them coarse to fine, predict depth."""

from __future__ import annotations

import torch
from torch import nn

from .configs import DPTConfig
from .layers import Resize


def _conv_out(n: int) -> int:
    """Side length after the 3x3, stride-2, padding-1 conv of the coarsest level."""
    return (n - 1) // 2 + 1


class ResidualUnit(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.conv1 = nn.Conv2d(features, features, 3, padding=1)
        self.conv2 = nn.Conv2d(features, features, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(torch.relu(self.conv1(torch.relu(x))))


class PromptUnit(nn.Module):
    """Prompt Depth Anything's prompt branch in one fusion block: the normalised prompt depth, resized to the
    block's map (bilinear, align_corners=False), through three 3x3 convs (1 -> features, ReLU between)."""

    def __init__(self, features: int, prompt_hw: tuple[int, int], map_hw: tuple[int, int]):
        super().__init__()
        self.resize = Resize(prompt_hw, map_hw, align_corners=False)
        self.conv1 = nn.Conv2d(1, features, 3, padding=1)
        self.conv2 = nn.Conv2d(features, features, 3, padding=1)
        self.conv3 = nn.Conv2d(features, features, 3, padding=1)

    def forward(self, prompt: torch.Tensor) -> torch.Tensor:
        return self.convs(self.resize(prompt))

    def convs(self, prompt: torch.Tensor) -> torch.Tensor:
        """The three convolutions on the prompt already at the block's map size."""
        return self.conv3(torch.relu(self.conv2(torch.relu(self.conv1(prompt)))))


class FusionBlock(nn.Module):
    """Adds the skip connection, refines, adds the prompt branch (Prompt Depth Anything only), upsamples to the
    next level's size, projects."""

    def __init__(self, features: int, in_hw: tuple[int, int], out_hw: tuple[int, int],
                 prompt_hw: tuple[int, int] | None = None):
        super().__init__()
        self.res1 = ResidualUnit(features)
        self.res2 = ResidualUnit(features)
        self.prompt = PromptUnit(features, prompt_hw, in_hw) if prompt_hw is not None else None
        self.resize = Resize(in_hw, out_hw)
        self.out_conv = nn.Conv2d(features, features, 1)
        # Upstream order is resize, then out_conv; `rewrites.conv_before_resize` swaps them.
        self.conv_first = False

    def forward(self, x: torch.Tensor, skip: torch.Tensor | None = None,
                prompt: torch.Tensor | None = None) -> torch.Tensor:
        if skip is not None:
            x = x + self.res1(skip)
        x = self.res2(x)
        if self.prompt is not None:
            x = x + self.prompt(prompt)
        if self.conv_first:
            return self.resize(self.out_conv(x))
        return self.out_conv(self.resize(x))


class DPTHead(nn.Module):
    """Depth head for a (gh, gw) patch grid -> (B, H, W), ended by ``cfg.activation``: ReLU (relative inverse
    depth), sigmoid x ``cfg.max_depth`` (metres) or exp (Depth Anything 3)."""

    def __init__(self, cfg: DPTConfig, grid_hw: tuple[int, int], patch: int,
                 prompt_hw: tuple[int, int] | None = None):
        super().__init__()
        gh, gw = grid_hw
        c = cfg.out_channels
        self.grid_hw = (gh, gw)
        self.projects = nn.ModuleList(nn.Conv2d(cfg.in_dim, ch, 1) for ch in c)
        self.resize = nn.ModuleList([
            nn.ConvTranspose2d(c[0], c[0], kernel_size=4, stride=4),
            nn.ConvTranspose2d(c[1], c[1], kernel_size=2, stride=2),
            nn.Identity(),
            nn.Conv2d(c[3], c[3], kernel_size=3, stride=2, padding=1),
        ])
        self.layer_rn = nn.ModuleList(nn.Conv2d(ch, cfg.features, 3, padding=1, bias=False) for ch in c)
        sizes = [(gh * 4, gw * 4), (gh * 2, gw * 2), (gh, gw), (_conv_out(gh), _conv_out(gw))]
        # fusion[0] works on the coarsest level; the last one doubles the finest level.
        targets = [sizes[2], sizes[1], sizes[0], (gh * 8, gw * 8)]
        self.fusion = nn.ModuleList(
            FusionBlock(cfg.features, src, dst, prompt_hw) for src, dst in zip(sizes[::-1], targets)
        )
        if not cfg.first_skip:
            self.fusion[0].res1 = None
        self.activation, self.max_depth = cfg.activation, cfg.max_depth
        self.out_conv1 = nn.Conv2d(cfg.features, cfg.features // 2, 3, padding=1)
        self.out_resize = Resize((gh * 8, gw * 8), (gh * patch, gw * patch))
        self.out_conv2 = nn.Conv2d(cfg.features // 2, cfg.head_hidden, 3, padding=1)
        self.out_conv3 = nn.Conv2d(cfg.head_hidden, 1, 1)

    def forward(self, tokens: list[torch.Tensor], prompt: torch.Tensor | None = None) -> torch.Tensor:
        """``prompt``: the (1, 1, h, w) prompt depth normalised to [0, 1], for a head built with ``prompt_hw``."""
        gh, gw = self.grid_hw
        maps = []
        for i, t in enumerate(tokens):
            x = t.reshape(1, gh, gw, t.shape[-1]).permute(0, 3, 1, 2)
            maps.append(self.layer_rn[i](self.resize[i](self.projects[i](x))))
        x = self.fusion[0](maps[3], prompt=prompt)
        for block, skip in zip(self.fusion[1:], maps[2::-1]):
            x = block(x, skip, prompt)
        x = self.out_resize(self.out_conv1(x))
        x = self.activate(self.out_conv3(torch.relu(self.out_conv2(x))))
        return x.reshape(1, *x.shape[2:])

    def activate(self, x: torch.Tensor) -> torch.Tensor:
        if self.activation == "sigmoid":  # Prompt Depth Anything's max_depth is 1: no multiplication (nor its constant)
            return torch.sigmoid(x) if self.max_depth == 1 else torch.sigmoid(x) * self.max_depth
        return torch.exp(x) if self.activation == "exp" else torch.relu(x)
