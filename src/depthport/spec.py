"""What a model id is: a `Family` (how an architecture is built, loaded, checked against upstream and fed) and
a `ModelSpec` (one id's size, weights, licence, default shape and output meaning). Plain data; the ids are
listed in `depthport.registry`, the families in `depthport.families`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

OUTPUT_SPACES = ("inverse depth", "depth")  # larger = nearer; larger = farther


@dataclass(frozen=True, kw_only=True)
class Family:
    """Everything that depends on the architecture and not on its size.

    - ``configs``: config name -> architecture config (`depthport.models.configs`).
    - ``build_model(config, input_hw, pos_formula, confidence)``: the reference-form module for one input shape.
    - ``init_random(model, seed)``: seeded random weights, in place.
    - ``load_weights(spec, weights, expected)``: a file, folder or hub repo id -> ``LoadedWeights`` checked key by
      key against ``expected`` (name -> shape).
    - ``weight_formats``: the checkpoint formats (`depthport.weights.formats.KeyMapFormat`) it accepts.
    - ``reference(spec, weights)``: the upstream implementation with the same weights, for parity.
    - ``preprocess(image, hw, normalize)``: a PIL RGB image -> the (1, 3, H, W) float32 input, as upstream
      prepares images (``normalize=False`` when the ImageNet normalisation is folded into the model).
    """

    name: str
    configs: Mapping[str, Any]
    build_model: Callable[..., Any]
    init_random: Callable[..., Any]
    load_weights: Callable[..., Any]
    weight_formats: tuple[Any, ...]
    reference: Callable[..., Any]
    preprocess: Callable[..., Any]


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """One model id: which family and size, which upstream weights, what the output means."""

    id: str
    arch: Family
    config: str  # name in arch.configs
    tiny: str  # name in arch.configs of the same architecture at toy size (what the tests build)
    licence: str
    default_hw: tuple[int, int]
    output: str  # the output's meaning and shape, in words (report.json, model card)
    output_space: str  # one of OUTPUT_SPACES
    channel_dim: bool = False  # output [1, 1, H, W] instead of [1, H, W]
    pos_formula: str | None = None  # position-embedding resampling fixed by the architecture (else: the weights')
    hf_repo: str = ""  # transformers-format checkpoint on the Hub
    official_repo: str = ""  # the upstream repository's checkpoint on the Hub ...
    official_file: str = ""  # ... and its file there
    hidden: bool = False  # test-only: not listed by `depthport models`

    def __post_init__(self):
        for name in (self.config, self.tiny):
            if name not in self.arch.configs:
                raise ValueError(f"{self.id}: no {self.arch.name} config {name!r}")
        if self.output_space not in OUTPUT_SPACES:
            raise ValueError(f"{self.id}: output_space {self.output_space!r} is not one of {OUTPUT_SPACES}")

    @property
    def family(self) -> str:
        """The family's name, for display."""
        return self.arch.name

    @property
    def model_config(self):
        return self.arch.configs[self.config]

    @property
    def pretrain_hw(self) -> tuple[int, int]:
        """The input shape the checkpoints were trained at (patch x pretraining grid), where neither upstream
        resamples the position embedding."""
        return self.model_config.vit.pretrain_hw

    def preprocess(self, image, hw: tuple[int, int], normalize: bool = True):
        return self.arch.preprocess(image, hw, normalize)

    def output_shape(self, input_hw: tuple[int, int]) -> list[int]:
        return [1, 1, *input_hw] if self.channel_dim else [1, *input_hw]
