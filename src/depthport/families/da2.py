"""Depth Anything V2: DINOv2 + DPT; transformers-format and official ``.pth`` checkpoints; checked against
transformers (with the official position-embedding resampling for official checkpoints); bicubic stretch."""

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


def init_random(model, seed: int = 0):
    from ..weights.random_init import init_random as init

    return init(model, seed)


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
