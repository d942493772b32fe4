"""model id + weights + export shape -> a loaded, rewritten PyTorch model ready for export."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from . import rewrites as rw
from .models.depth_anything_v2 import CONFIGS, DepthAnythingV2
from .registry import ModelSpec, get_spec
from .weights import LoadedWeights, load_weights
from .weights.random_init import init_random


@dataclass
class Built:
    model: nn.Module
    spec: ModelSpec
    weights: LoadedWeights
    input_hw: tuple[int, int]
    pos_formula: str
    rewrites: list[str] = field(default_factory=list)


def architecture(spec: ModelSpec, input_hw: tuple[int, int], pos_formula: str) -> nn.Module:
    if spec.family == "depth-anything-v2":
        return DepthAnythingV2(CONFIGS[spec.config], input_hw, pos_formula)
    raise ValueError(f"no architecture for family {spec.family!r}")


def resolve_weights(spec: ModelSpec, weights: str | LoadedWeights, seed: int = 0) -> LoadedWeights:
    if isinstance(weights, LoadedWeights):
        return weights
    template = architecture(spec, spec.pretrain_hw, "official")
    if weights == "random":
        init_random(template, seed)
        return LoadedWeights({k: v.detach().clone() for k, v in template.state_dict().items()},
                             f"random (seed {seed})", "random", random=True)
    expected = {k: v.shape for k, v in template.state_dict().items()}
    return load_weights(spec, weights, expected)


def build(model_id: str | ModelSpec, input_hw: tuple[int, int], weights: str | LoadedWeights = "random",
          rewrites: list[str] | None = None, pos_formula: str | None = None) -> Built:
    """Architecture for ``input_hw``, strictly loaded, with ``rewrites`` applied (defaults: the export set)."""
    spec = model_id if isinstance(model_id, ModelSpec) else get_spec(model_id)
    loaded = resolve_weights(spec, weights)
    formula = pos_formula or loaded.pos_formula
    model = architecture(spec, input_hw, formula)
    model.load_state_dict(loaded.state, strict=True)
    names = rw.default_rewrites() if rewrites is None else list(rewrites)
    rw.apply(model, names)
    return Built(model.eval(), spec, loaded, tuple(input_hw), formula, names)


@torch.no_grad()
def run_torch(model: nn.Module, x) -> torch.Tensor:
    return model(torch.as_tensor(x))
