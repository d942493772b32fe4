"""Depth branch of Depth Anything 3's DualDPT head: the DPT head of Depth Anything V2 with a token LayerNorm,
sin-cos position embeddings on the feature maps and an exp-activated depth (+ confidence) output.

The auxiliary ray branch is not built (its output is discarded when the camera decoder exists). The position
embeddings are constants for the built grid, computed with the upstream's float32 arithmetic
(`depth_anything_3/model/utils/head_utils.py`), ratio 0.1 included.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .configs import DPTConfig, DualDPTConfig
from .dpt import DPTHead
from .layers import Resize


def _uv_axes(width: int, height: int, aspect_ratio: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The x and y coordinates of the upstream's `create_uv_grid` (diagonal-normalised, pixel centres)."""
    diag = (aspect_ratio**2 + 1.0) ** 0.5
    span_x, span_y = aspect_ratio / diag, 1.0 / diag
    xs = torch.linspace(-span_x * (width - 1) / width, span_x * (width - 1) / width, steps=width)
    ys = torch.linspace(-span_y * (height - 1) / height, span_y * (height - 1) / height, steps=height)
    return xs, ys


def _sincos(dim: int, pos: torch.Tensor, omega_0: float) -> torch.Tensor:
    """The upstream's `make_sincos_pos_embed`: (M,) -> (M, dim), sines then cosines."""
    omega = torch.arange(dim // 2, dtype=torch.float32)
    omega /= dim / 2.0
    omega = 1.0 / omega_0**omega
    out = torch.einsum("m,d->md", pos.reshape(-1), omega)
    return torch.cat([torch.sin(out), torch.cos(out)], dim=1)


class PosEmbed2D(nn.Module):
    """Adds the upstream's UV sin-cos embedding (times ``ratio``) to a (1, C, h, w) map.

    Its first C/2 channels vary only along the width and the rest only along the height, so it is stored as
    two rank-4 constants, (1, C, 1, w) and (1, C, h, 1), each zero on the other half's channels, added in
    turn: bit-identical to adding the full map, and no BROADCAST_TO (elementwise ADD broadcasts implicitly).
    The converter folds two constant adds in a row into one full-size constant, which is small at the patch
    grid; at full resolution `after_resize` keeps them apart (a 58 MB constant at 896x504 otherwise).
    """

    def __init__(self, channels: int, hw: tuple[int, int], image_hw: tuple[int, int], ratio: float, omega: float):
        super().__init__()
        if channels % 4:
            raise ValueError(f"sin-cos position embedding needs channels divisible by 4, got {channels}")
        h, w = hw
        xs, ys = _uv_axes(w, h, image_hw[1] / image_hw[0])
        half = channels // 2
        along_w = torch.zeros(1, channels, 1, w)
        along_h = torch.zeros(1, channels, h, 1)
        along_w[0, :half, 0, :] = (_sincos(half, xs, omega) * ratio).T
        along_h[0, half:, :, 0] = (_sincos(half, ys, omega) * ratio).T
        self.register_buffer("along_w", along_w, persistent=False)
        self.register_buffer("along_h", along_h, persistent=False)

    def full(self) -> torch.Tensor:
        """The (1, C, h, w) embedding the upstream adds."""
        return self.along_w + self.along_h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.along_w + self.along_h

    def after_resize(self, resize: Resize, x: torch.Tensor) -> torch.Tensor:
        """``self(resize(x))``. With an exact resize the width half is added between its two band products:
        rows of an align_corners matrix sum to one, so a map constant along the height passes the height
        product unchanged, and the converter cannot fold the two adds into one full-size constant.
        """
        if resize.mode != "exact":
            return self(resize(x))
        x = resize._apply_last(x, "w", resize.w_blocks) + self.along_w
        x = resize._apply_last(x.transpose(2, 3), "h", resize.h_blocks).transpose(2, 3)
        return x + self.along_h


class DualDPTHead(DPTHead):
    """Four (gh*gw, in_dim) token maps -> depth (1, 1, H, W) = exp(logit 0) [, confidence = exp(logit 1) + 1].

    Reuses `DPTHead`'s projections, resize layers, fusion blocks and output convs (same parameter names);
    the coarsest fusion block has no skip unit upstream, so its ``res1`` is removed.
    """

    def __init__(self, cfg: DualDPTConfig, grid_hw: tuple[int, int], patch: int, confidence: bool = False):
        super().__init__(DPTConfig(cfg.in_dim, cfg.out_channels, cfg.features, cfg.head_hidden), grid_hw, patch)
        gh, gw = grid_hw
        image_hw = (gh * patch, gw * patch)
        self.confidence = confidence
        self.fusion[0].res1 = None
        self.out_conv3 = nn.Conv2d(cfg.head_hidden, cfg.output_dim, 1)
        self.norm = nn.LayerNorm(cfg.in_dim, eps=cfg.norm_eps)
        self.pos = nn.ModuleList(
            PosEmbed2D(ch, grid_hw, image_hw, cfg.pos_ratio, cfg.pos_omega) for ch in cfg.out_channels
        )
        self.out_pos = PosEmbed2D(cfg.features // 2, image_hw, image_hw, cfg.pos_ratio, cfg.pos_omega)

    @torch.no_grad()
    def depth_only(self) -> None:
        """Without confidence, ``out_conv3`` as the one-output convolution its depth channel is, so that a rewrite
        replacing the module (``export.split_k``) sees what is computed."""
        conv = self.out_conv3
        if self.confidence or conv.out_channels == 1:
            return
        depth = nn.Conv2d(conv.in_channels, 1, conv.kernel_size, conv.stride, conv.padding, conv.dilation)
        depth.weight.copy_(conv.weight[:1])
        depth.bias.copy_(conv.bias[:1])
        self.out_conv3 = depth.to(conv.weight.dtype)

    def forward(self, tokens: list[torch.Tensor]):
        gh, gw = self.grid_hw
        maps = []
        for i, t in enumerate(tokens):
            x = self.norm(t).reshape(1, gh, gw, t.shape[-1]).permute(0, 3, 1, 2)
            x = self.resize[i](self.pos[i](self.projects[i](x)))
            maps.append(self.layer_rn[i](x))
        x = self.fusion[0](maps[3])
        for block, skip in zip(self.fusion[1:], maps[2::-1]):
            x = block(x, skip)
        x = torch.relu(self.out_conv2(self.out_pos.after_resize(self.out_resize, self.out_conv1(x))))
        if not self.confidence:
            conv = self.out_conv3
            if isinstance(conv, nn.Conv2d) and conv.out_channels > 1:
                return torch.exp(F.conv2d(x, conv.weight[:1], conv.bias[:1]))
            return torch.exp(conv(x))  # the depth channel alone (depth_only), perhaps replaced (export.split_k)
        logits = self.out_conv3(x)
        return torch.exp(logits[:, :1]), torch.exp(logits[:, 1:2]) + 1
