"""Prompt Depth Anything: Depth Anything V2 with a prompt depth input (a phone's coarse LiDAR / ToF map in metres)
fed into every DPT fusion block; transformers-format checkpoints (depth-anything/prompt-depth-anything-*-hf);
checked against transformers' PromptDepthAnythingForDepthEstimation; bicubic resize of the image, the prompt fed
at its own shape."""

from __future__ import annotations

from ..models.configs import PROMPT_DA_CONFIGS
from ..preprocess import to_tensor
from ..spec import Family
from ..weights.formats import TRANSFORMERS_PROMPT
from ..weights.load import load_weights

ARKIT_PROMPT_HW = (192, 256)  # ARKit sceneDepth, landscape (height, width)


def build_model(config, input_hw: tuple[int, int], pos_formula: str, confidence: bool = False,
                prompt_hw: tuple[int, int] = ARKIT_PROMPT_HW):
    if confidence:
        raise ValueError("Prompt Depth Anything has no confidence output")
    from ..models.prompt_depth_anything import PromptDepthAnything

    return PromptDepthAnything(config, input_hw, prompt_hw, pos_formula)


def init_random(model, seed: int = 0):
    """Seeded random weights; the sigmoid head gets logits of mean 0 and std 1, so the depth spans the prompt's
    range instead of saturating at one end."""
    from ..weights.random_init import init_random as init
    from ..weights.random_init import recentre_logits

    init(model, seed)
    recentre_logits(model.head.out_conv3, 0.0, 1.0)
    return model


def reference(spec, weights):
    from ..reference import PromptTransformersReference

    return PromptTransformersReference(spec, weights)


PROMPT_DA = Family(
    name="prompt-depth-anything",
    configs=PROMPT_DA_CONFIGS,
    build_model=build_model,
    init_random=init_random,
    load_weights=load_weights,
    weight_formats=(TRANSFORMERS_PROMPT,),
    reference=reference,
    preprocess=to_tensor,
)
