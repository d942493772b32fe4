"""Stress weights: seeded random weights given the outliers that trained DINOv2 backbones have, for tests and
dry runs of FP16 safety (``--weights stress``). Random weights alone show none of them.

What is planted, and where it comes from:
- **Massive residual channels.** Trained ViTs, DINOv2 among them, carry a few fixed residual-stream channels
  whose activations are hundreds of units large in every layer after the first ones (Sun et al. 2024, "Massive
  Activations in Large Language Models", section on ViTs; Darcet et al. 2023). Here: ``MASSIVE_CHANNELS``
  channels reach ``MASSIVE_VALUE`` (400) in every token from block 0's output on, through its MLP bias. In FP16
  a LayerNorm's variance then overflows ((x - mean)^2 > 65504 once |x - mean| > 256).
- **High-norm tokens.** A few patch tokens with a norm far above the rest ("Vision Transformers Need Registers",
  Darcet et al. 2023: about 10x). Here: a 2x2 patch of positions at the centre of the pretraining grid gets
  ``HIGH_NORM_VALUE`` (300) in one more channel, through the position embedding.
- **Attention between them.** Block 1's Q and K read that channel for its first head with a gain chosen so
  that Q·Kᵀ between two high-norm tokens is ``LOGIT_TARGET`` (4x the FP16 maximum, 65504): the published LiteRT
  port of a ViT depth model needed 64 clamps on Q·Kᵀ for this reason. Ordinary tokens' logits stay small.

The planted weights are random weights still, and everything exported from them is labelled random.
"""

from __future__ import annotations

import math

import torch

from .load import LoadedWeights

MASSIVE_CHANNELS = 2
MASSIVE_VALUE = 400.0
HIGH_NORM_VALUE = 300.0
FP16_MAX = 65504.0
LOGIT_TARGET = 4 * FP16_MAX
MASSIVE_BLOCK, ATTENTION_BLOCK = 0, 1


def _key(state: dict, *names: str) -> str:
    for name in names:
        if name in state:
            return name
    raise ValueError(f"stress weights need a DINOv2 encoder with plain Q/K projections; none of {names} is in "
                     "this model's weights")


@torch.no_grad()
def plant_outliers(loaded: LoadedWeights, heads: int, seed: int = 0) -> LoadedWeights:
    """A copy of ``loaded`` (random weights of a DINOv2 + DPT model) with the outliers above planted."""
    state = {k: v.clone() for k, v in loaded.state.items()}
    gen = torch.Generator().manual_seed(seed + 1)
    pos = state[_key(state, "encoder.pos_embed")]
    dim = pos.shape[-1]
    channels = torch.randperm(dim, generator=gen)[: MASSIVE_CHANNELS + 1].tolist()
    massive, high = channels[:MASSIVE_CHANNELS], channels[MASSIVE_CHANNELS]
    block = f"encoder.blocks.{MASSIVE_BLOCK}"
    gamma = state[_key(state, f"{block}.ls2.gamma")]
    state[_key(state, f"{block}.mlp.fc2.bias")][massive] = MASSIVE_VALUE / gamma[massive]

    grid = math.isqrt(pos.shape[1] - 1)
    c = grid // 2
    patch = [1 + r * grid + col for r in (c - 1, c) for col in (c - 1, c)]
    pos[0, patch, high] += HIGH_NORM_VALUE

    # A high-norm token after norm1: its `high` channel is (HIGH - mean) / std, the std set by the planted values.
    spread = math.sqrt((HIGH_NORM_VALUE**2 + MASSIVE_CHANNELS * MASSIVE_VALUE**2) / dim)
    z = HIGH_NORM_VALUE / spread
    head_dim = dim // heads
    gain = math.sqrt(LOGIT_TARGET * math.sqrt(head_dim) / (head_dim * z * z))
    attn = f"encoder.blocks.{ATTENTION_BLOCK}.attn"
    for proj in ("q", "k"):
        weight = state[_key(state, f"{attn}.{proj}.weight")]
        weight[:head_dim, high] += gain
    source = (f"{loaded.source} with planted trained-weight outliers (stress: {MASSIVE_CHANNELS} residual channels "
              f"at {MASSIVE_VALUE:g}, 4 high-norm tokens at {HIGH_NORM_VALUE:g}, Q·Kᵀ ~{LOGIT_TARGET:.3g} between "
              "them)")
    return LoadedWeights(state, source, "stress", random=True)
