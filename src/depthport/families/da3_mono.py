"""Depth Anything 3's monocular models (DA3Metric-Large, DA3Mono-Large): plain DINOv2 + a DPT head ending in exp;
the package's checkpoints (hub repos depth-anything/DA3METRIC-LARGE, DA3MONO-LARGE); checked against the
`depth-anything-3` package's network (its depth head's output, before the sky fill); DA3's own resize."""

from __future__ import annotations

from ..models.configs import DA3_MONO_CONFIGS
from ..preprocess import da3_input
from ..spec import Family
from ..weights.keymaps_da3 import OFFICIAL_DA3_MONO
from .da3 import init_random, load_weights  # the same checkpoint format and init as DA3


def build_model(config, input_hw: tuple[int, int], pos_formula: str, confidence: bool = False):
    if confidence:
        raise ValueError("Depth Anything 3's monocular models have no confidence output")
    from ..models.depth_anything_v3_mono import DepthAnythingV3Mono

    return DepthAnythingV3Mono(config, input_hw, pos_formula)


def reference(spec, weights):
    from ..reference import OfficialDA3MonoReference

    return OfficialDA3MonoReference(spec, weights)


DA3_MONO = Family(
    name="depth-anything-3-mono",
    configs=DA3_MONO_CONFIGS,
    build_model=build_model,
    init_random=init_random,
    load_weights=load_weights,
    weight_formats=(OFFICIAL_DA3_MONO,),
    reference=reference,
    preprocess=da3_input,
)
