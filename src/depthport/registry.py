"""Model ids: which architecture, which upstream weights, which licence, which default export shape."""

from __future__ import annotations

from dataclasses import dataclass

from .preprocess import InputError


@dataclass(frozen=True)
class ModelSpec:
    id: str
    family: str
    config: str
    licence: str
    hf_repo: str
    official_repo: str
    official_file: str
    default_hw: tuple[int, int] = (518, 686)
    output: str = "relative inverse depth (larger = nearer), shape [1, H, W]"
    hidden: bool = False
    pos_formula: str | None = None  # position-embedding resampling fixed by the architecture (else: the weights')
    channel_dim: bool = False  # output [1, 1, H, W] instead of [1, H, W]
    output_space: str = "inverse depth"  # what the output measures: "inverse depth" (larger = nearer) or "depth"

    @property
    def pretrain_hw(self) -> tuple[int, int]:
        return (518, 518)

    def output_shape(self, input_hw: tuple[int, int]) -> list[int]:
        return [1, 1, *input_hw] if self.channel_dim else [1, *input_hw]


DA3_OUTPUT = "depth up to scale (larger = farther), exp of the head's logit, shape [1, 1, H, W]"

MODELS = {
    s.id: s
    for s in [
        ModelSpec("da2-small", "depth-anything-v2", "small", "Apache-2.0", "depth-anything/Depth-Anything-V2-Small-hf",
                  "depth-anything/Depth-Anything-V2-Small", "depth_anything_v2_vits.pth"),
        ModelSpec("da2-base", "depth-anything-v2", "base", "CC-BY-NC-4.0", "depth-anything/Depth-Anything-V2-Base-hf",
                  "depth-anything/Depth-Anything-V2-Base", "depth_anything_v2_vitb.pth"),
        ModelSpec("da2-large", "depth-anything-v2", "large", "CC-BY-NC-4.0", "depth-anything/Depth-Anything-V2-Large-hf",
                  "depth-anything/Depth-Anything-V2-Large", "depth_anything_v2_vitl.pth"),
        ModelSpec("da2-tiny", "depth-anything-v2", "tiny", "Apache-2.0", "", "", "", default_hw=(56, 70), hidden=True),
        ModelSpec("da3-small", "depth-anything-3", "small", "Apache-2.0", "", "depth-anything/DA3-SMALL",
                  "model.safetensors", default_hw=(896, 504), output=DA3_OUTPUT, pos_formula="official",
                  channel_dim=True, output_space="depth"),
        ModelSpec("da3-tiny", "depth-anything-3", "tiny", "Apache-2.0", "", "", "", default_hw=(70, 42),
                  output=DA3_OUTPUT, hidden=True, pos_formula="official", channel_dim=True,
                  output_space="depth"),
    ]
}


def get_spec(model_id: str) -> ModelSpec:
    try:
        return MODELS[model_id]
    except KeyError:
        known = ", ".join(k for k, s in MODELS.items() if not s.hidden)
        raise InputError(f"unknown model {model_id!r}; supported: {known}") from None
