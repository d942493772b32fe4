"""Model ids: which family and size, which upstream weights, which licence, which default export shape.

Adding a size is one entry here plus its config in `models.configs`; adding a family is a `families` module too.
Every id names a ``tiny`` config, and that config is registered as a hidden id: the tests export it.
"""

from __future__ import annotations

from .errors import InputError
from .families.da2 import DA2
from .families.da3 import DA3
from .spec import ModelSpec

__all__ = ["MODELS", "ModelSpec", "get_spec", "tiny_spec"]

DA2_OUTPUT = "relative inverse depth (larger = nearer), shape [1, H, W]"
DA3_OUTPUT = "depth up to scale (larger = farther), exp of the head's logit, shape [1, 1, H, W]"
_DA2 = dict(arch=DA2, tiny="tiny", output=DA2_OUTPUT, output_space="inverse depth")
_DA3 = dict(arch=DA3, tiny="tiny", output=DA3_OUTPUT, output_space="depth", channel_dim=True, pos_formula="official")

MODELS = {
    s.id: s
    for s in [
        ModelSpec(id="da2-small", config="small", licence="Apache-2.0", default_hw=(518, 686),
                  hf_repo="depth-anything/Depth-Anything-V2-Small-hf",
                  official_repo="depth-anything/Depth-Anything-V2-Small", official_file="depth_anything_v2_vits.pth",
                  **_DA2),
        ModelSpec(id="da2-base", config="base", licence="CC-BY-NC-4.0", default_hw=(518, 686),
                  hf_repo="depth-anything/Depth-Anything-V2-Base-hf",
                  official_repo="depth-anything/Depth-Anything-V2-Base", official_file="depth_anything_v2_vitb.pth",
                  **_DA2),
        ModelSpec(id="da2-large", config="large", licence="CC-BY-NC-4.0", default_hw=(518, 686),
                  hf_repo="depth-anything/Depth-Anything-V2-Large-hf",
                  official_repo="depth-anything/Depth-Anything-V2-Large", official_file="depth_anything_v2_vitl.pth",
                  **_DA2),
        ModelSpec(id="da2-tiny", config="tiny", licence="Apache-2.0", default_hw=(56, 70), hidden=True, **_DA2),
        ModelSpec(id="da3-small", config="small", licence="Apache-2.0", default_hw=(896, 504),
                  official_repo="depth-anything/DA3-SMALL", official_file="model.safetensors", **_DA3),
        ModelSpec(id="da3-tiny", config="tiny", licence="Apache-2.0", default_hw=(70, 42), hidden=True, **_DA3),
    ]
}


def get_spec(model_id: str) -> ModelSpec:
    try:
        return MODELS[model_id]
    except KeyError:
        known = ", ".join(k for k, s in MODELS.items() if not s.hidden)
        raise InputError(f"unknown model {model_id!r}; supported: {known}") from None


def tiny_spec(spec: ModelSpec) -> ModelSpec:
    """The registered id of ``spec``'s tiny config (same family, config ``spec.tiny``)."""
    for candidate in MODELS.values():
        if candidate.arch is spec.arch and candidate.config == spec.tiny:
            return candidate
    raise LookupError(f"{spec.id}: its tiny config {spec.tiny!r} is not a registered id")
