"""model id + weights + export shape -> a loaded, rewritten PyTorch model ready for export."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from . import rewrites as rw
from .models import depth_anything_v3 as da3
from .models.depth_anything_v2 import CONFIGS, DepthAnythingV2
from .registry import ModelSpec, get_spec
from .weights import LoadedWeights, load_weights
from .weights.load_da3 import init_random_da3, load_da3_weights
from .weights.random_init import init_random


@dataclass
class Built:
    model: nn.Module
    spec: ModelSpec
    weights: LoadedWeights
    input_hw: tuple[int, int]
    pos_formula: str
    rewrites: list[str] = field(default_factory=list)


def architecture(spec: ModelSpec, input_hw: tuple[int, int], pos_formula: str, confidence: bool = False) -> nn.Module:
    if spec.family == "depth-anything-3":
        return da3.DepthAnythingV3(da3.CONFIGS[spec.config], input_hw, pos_formula, confidence)
    if confidence:
        raise ValueError(f"{spec.id} has no confidence output")
    if spec.family == "depth-anything-v2":
        return DepthAnythingV2(CONFIGS[spec.config], input_hw, pos_formula)
    raise ValueError(f"no architecture for family {spec.family!r}")


def resolve_weights(spec: ModelSpec, weights: str | LoadedWeights, seed: int = 0) -> LoadedWeights:
    if isinstance(weights, LoadedWeights):
        return weights
    template = architecture(spec, spec.pretrain_hw, "official")
    if spec.family == "depth-anything-3" and weights != "random":
        return load_da3_weights(spec, weights, {k: v.shape for k, v in template.state_dict().items()})
    if weights == "random":
        (init_random_da3 if spec.family == "depth-anything-3" else init_random)(template, seed)
        return LoadedWeights({k: v.detach().clone() for k, v in template.state_dict().items()},
                             f"random (seed {seed})", "random", random=True)
    expected = {k: v.shape for k, v in template.state_dict().items()}
    return load_weights(spec, weights, expected)


def build(model_id: str | ModelSpec, input_hw: tuple[int, int], weights: str | LoadedWeights = "random",
          rewrites: list[str] | None = None, pos_formula: str | None = None, confidence: bool = False) -> Built:
    """Architecture for ``input_hw``, strictly loaded, with ``rewrites`` applied (defaults: the export set).

    ``confidence`` (Depth Anything 3 only) adds the head's confidence map as a second output. The rewrites run
    in float64 and the result is cast to float32 once, so folded weights are rounded once, not at every fold.
    """
    spec = model_id if isinstance(model_id, ModelSpec) else get_spec(model_id)
    loaded = resolve_weights(spec, weights)
    formula = pos_formula or spec.pos_formula or loaded.pos_formula
    model = architecture(spec, input_hw, formula, confidence).double()
    model.load_state_dict(loaded.state, strict=True)
    names = rw.default_rewrites() if rewrites is None else list(rewrites)
    rw.apply(model, names)
    return Built(model.float().eval(), spec, loaded, tuple(input_hw), formula, names)


@torch.no_grad()
def run_torch(model: nn.Module, x) -> torch.Tensor:
    return model(torch.as_tensor(x))
