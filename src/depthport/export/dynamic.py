"""Depth Anything V2 (and Prompt Depth Anything) with the input's height and width free (multiples of 14), for the
dynamic-shape ONNX.

depthport's export form is built for one shape: the position embedding is baked for its patch grid
(``bake_pos_embed``) and the bilinear resizes are constant band matrices (``exact_resize``). ``DynamicDA2`` runs
the same loaded, rewritten modules with every size taken from the input instead: the position embedding is
resampled at run time with the bicubic weights of ``F.interpolate`` written as two small matrices built from the
grid size (both upstream formulas), and the resizes are bilinear interpolations to sizes read from the input.
Every other rewrite (folded LayerScale, attention scale and norms, centred residual stream, deconvolutions as
depth-to-space, conv before resize) is shape-free and kept. A prompted model's prompt is free too (any h x w): each
fusion block resizes it to its map at run time (bilinear, align_corners=False, as upstream).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..models.depth_anything_v2 import DepthAnythingV2
from ..models.prompt_depth_anything import PromptDepthAnything, normalise_prompt

SHAPE_BOUND = ("bake_pos_embed", "exact_resize", "approx_resize")  # rewrites that fix the input shape
CUBIC_A = -0.75  # PyTorch's bicubic convolution constant


def cubic_matrix(n_out, n_in: int, scale: torch.Tensor) -> torch.Tensor:
    """(n_out, n_in) matrix of 1-D bicubic interpolation, align_corners=False, border-clamped, as ``F.interpolate``
    computes it: source x = (i + 0.5) * scale - 0.5, weights from the fraction of x (``n_out`` may be symbolic)."""
    x = (torch.arange(n_out, dtype=torch.float32) + 0.5) * scale - 0.5
    left = torch.floor(x)
    t = x - left
    a = CUBIC_A
    weights = (((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
               ((a + 2) * t - (a + 3)) * t * t + 1,
               ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
               ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a)
    cols = torch.arange(n_in, dtype=torch.float32)
    out = torch.zeros_like(x)[:, None] * cols[None, :]
    for k, w in enumerate(weights):
        idx = torch.clamp(left + (k - 1), 0, n_in - 1)
        out = out + w[:, None] * (idx[:, None] == cols[None, :]).to(torch.float32)
    return out


def sampling_steps(gh, gw, g: int, formula: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The source step per output index along H and W for a gh x gw grid from g x g: g / (n + 0.1) for the official
    formula, g / n for transformers' ``size=``; 1 on both (no resampling) for a g x g grid, as both upstreams skip
    it there. Sizes become tensors, so that no comparison of them is a branch in the graph."""
    n = torch.stack([torch.full((), gh, dtype=torch.float32), torch.full((), gw, dtype=torch.float32)])
    step = g / (n + 0.1) if formula == "official" else g / n
    step = torch.where((n == g).all(), torch.ones_like(step), step)
    return step[0], step[1]


class DynamicDA2(nn.Module):
    """A built ``DepthAnythingV2`` (without the shape-bound rewrites) taking (1, 3, H, W), H and W multiples of 14;
    a built ``PromptDepthAnything`` also takes its prompt (1, 1, h, w), h and w free."""

    def __init__(self, model: DepthAnythingV2 | PromptDepthAnything):
        super().__init__()
        if not isinstance(model, (DepthAnythingV2, PromptDepthAnything)):
            raise TypeError("onnx-dynamic is made for Depth Anything V2 and Prompt Depth Anything models")
        if model.encoder.baked_pos_embed is not None:
            raise ValueError("build the model without bake_pos_embed for a dynamic shape")
        self.prompted = isinstance(model, PromptDepthAnything)
        if not self.prompted and getattr(model.cfg.dpt, "activation", "relu") != "relu":
            raise TypeError("onnx-dynamic is made for relative Depth Anything V2 models (ReLU head)")
        self.model = model
        self.prompt_hw = getattr(model, "prompt_hw", None)
        self.align_corners = model.head.out_resize.mode != "approx"

    def position_embedding(self, gh, gw) -> torch.Tensor:
        """(gh * gw, C) patch position embedding resampled for a gh x gw grid (the class token's is separate)."""
        enc = self.model.encoder
        g, dim = enc.cfg.pretrain_grid, enc.cfg.dim
        grid = enc.pos_embed[0, 1:].reshape(g, g, dim)
        step_h, step_w = sampling_steps(gh, gw, g, enc.pos_formula)
        rows, cols = cubic_matrix(gh, g, step_h), cubic_matrix(gw, g, step_w)
        out = torch.einsum("ig,ghc->ihc", rows, grid)
        out = torch.einsum("jh,ihc->ijc", cols, out)
        return out.reshape(-1, dim)

    def resize(self, x: torch.Tensor, size) -> torch.Tensor:
        return F.interpolate(x, size=size, mode="bilinear", align_corners=self.align_corners)

    def encode(self, x: torch.Tensor, gh, gw) -> list[torch.Tensor]:
        enc = self.model.encoder
        dim = enc.cfg.dim
        pos = self.position_embedding(gh, gw)
        cls_pos = enc.pos_embed[0, :1]
        patches = enc.patch_embed(x).permute(0, 2, 3, 1) + pos.reshape(1, gh, gw, dim)
        tokens = torch.cat([enc.cls_token.reshape(1, -1) + cls_pos, patches.reshape(-1, dim)], dim=0)
        outs = []
        for i, block in enumerate(enc.blocks):
            tokens = block(tokens)
            if i in self.model.cfg.layers:
                outs.append(enc.norm(tokens[1:]))
        return outs

    def fuse(self, block, x: torch.Tensor, skip: torch.Tensor | None, size, unit=None) -> torch.Tensor:
        if skip is not None:
            x = x + block.res1(skip)
        x = block.res2(x)
        if unit is not None:
            x = x + block.prompt.convs(F.interpolate(unit, size=x.shape[-2:], mode="bilinear", align_corners=False))
        if block.conv_first:
            return self.resize(block.out_conv(x), size)
        return block.out_conv(self.resize(x, size))

    def forward(self, x: torch.Tensor, prompt: torch.Tensor | None = None) -> torch.Tensor:
        head, patch = self.model.head, self.model.encoder.cfg.patch
        unit, low, span = normalise_prompt(prompt) if self.prompted else (None, None, None)
        gh, gw = x.shape[2] // patch, x.shape[3] // patch
        maps = []
        for i, t in enumerate(self.encode(x, gh, gw)):
            grid = t.reshape(1, gh, gw, t.shape[-1]).permute(0, 3, 1, 2)
            maps.append(head.layer_rn[i](head.resize[i](head.projects[i](grid))))
        targets = [m.shape[-2:] for m in maps[2::-1]] + [(gh * 8, gw * 8)]
        out = self.fuse(head.fusion[0], maps[3], None, targets[0], unit)
        for block, skip, size in zip(head.fusion[1:], maps[2::-1], targets[1:]):
            out = self.fuse(block, out, skip, size, unit)
        out = self.resize(head.out_conv1(out), (x.shape[2], x.shape[3]))
        out = head.activate(head.out_conv3(torch.relu(head.out_conv2(out)))).reshape(1, x.shape[2], x.shape[3])
        return out * span.reshape(1, 1, 1) + low.reshape(1, 1, 1) if self.prompted else out
