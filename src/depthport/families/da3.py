"""Depth Anything 3 (monocular depth path): DINOv2 with QK-norm, RoPE and a camera token + the DualDPT depth
branch; the package's checkpoints (hub repos depth-anything/DA3-*); checked against the `depth-anything-3`
package; DA3's own upper-bound area/cubic resize."""

from __future__ import annotations

from ..models.configs import DA3_CONFIGS
from ..preprocess import da3_input
from ..spec import Family
from ..weights.keymaps_da3 import OFFICIAL_DA3


def build_model(config, input_hw: tuple[int, int], pos_formula: str, confidence: bool = False):
    from ..models.depth_anything_v3 import DepthAnythingV3

    return DepthAnythingV3(config, input_hw, pos_formula, confidence)


def init_random(model, seed: int = 0):
    from ..weights.load_da3 import init_random_da3

    return init_random_da3(model, seed)


def load_weights(spec, weights: str, expected: dict):
    from ..weights.load_da3 import load_da3_weights

    return load_da3_weights(spec, weights, expected)


def reference(spec, weights):
    from ..reference import OfficialDA3Reference

    return OfficialDA3Reference(spec, weights)


DA3 = Family(
    name="depth-anything-3",
    configs=DA3_CONFIGS,
    build_model=build_model,
    init_random=init_random,
    load_weights=load_weights,
    weight_formats=(OFFICIAL_DA3,),
    reference=reference,
    preprocess=da3_input,
)
