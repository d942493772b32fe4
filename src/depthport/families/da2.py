"""Depth Anything V2, relative and metric: DINOv2 + DPT (ReLU head, or sigmoid x max_depth in metres);
transformers-format and official ``.pth`` checkpoints; checked against transformers (with the official
position-embedding resampling for official checkpoints); bicubic stretch."""

from __future__ import annotations

from ..models.configs import DA2_CONFIGS
from ..preprocess import to_tensor
from ..spec import Family
from ..weights.formats import OFFICIAL, TRANSFORMERS
from ..weights.load import load_weights


def build_model(config, input_hw: tuple[int, int], pos_formula: str, confidence: bool = False):
    if confidence:
        raise ValueError("Depth Anything V2 has no confidence output")
    from ..models.depth_anything_v2 import DepthAnythingV2

    return DepthAnythingV2(config, input_hw, pos_formula)


# The relative head ends in ReLU. Calibrated on noise input (mean 3, std 1), its logits on flat content (a sky, a
# grey wall; camera, or bicubic-upsampled 4x4 noise) move down by about 1.25 and spread 1.6-1.8x: at 518x686, 15 % of
# camera's pixels were clamped to 0, and pixels next to the clamp move by more than a factor 1.25 under FP16 storage
# alone (PyTorch half: worst delta<1.25 0.998). Mean 4 and std 0.5 keep such content over 4 sigma clear of the clamp.
RELU_LOGITS = (4.0, 0.5)


def init_random(model, seed: int = 0):
    """Seeded random weights; a metric head (sigmoid x max_depth) gets logits of mean 0 and std 1, so that the
    depth spans about 0.1 to 0.9 of max_depth instead of saturating near it; a relative head (ReLU) logits of
    mean 4 and std 0.5 (``RELU_LOGITS``), so that its depth stays clear of zero on real images too."""
    from ..weights.random_init import init_random as init
    from ..weights.random_init import recentre_logits

    init(model, seed)
    if model.head.activation == "sigmoid":
        recentre_logits(model.head.out_conv3, 0.0, 1.0)
    elif model.head.activation == "relu":
        recentre_logits(model.head.out_conv3, *RELU_LOGITS)
    return model


def reference(spec, weights):
    """transformers' model; for official ``.pth`` weights, with the official position-embedding resampling."""
    from ..reference import OfficialResamplingReference, TransformersReference

    cls = OfficialResamplingReference if weights.format == OFFICIAL.name else TransformersReference
    return cls(spec, weights)


DA2 = Family(
    name="depth-anything-v2",
    configs=DA2_CONFIGS,
    build_model=build_model,
    init_random=init_random,
    load_weights=load_weights,
    weight_formats=(TRANSFORMERS, OFFICIAL),
    reference=reference,
    preprocess=to_tensor,
)
