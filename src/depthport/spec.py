"""What a model id is: a `Family` (how an architecture is built, loaded, checked against upstream and fed) and
a `ModelSpec` (one id's size, weights, licence, default shape and output meaning). Plain data; the ids are
listed in `depthport.registry`, the families in `depthport.families`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

OUTPUT_SPACES = ("inverse depth", "depth")  # larger = nearer; larger = farther
# What one output value means. RELATIVE and UP_TO_SCALE have no unit; METRES is metres as it stands; CANONICAL is
# metres once multiplied by focal_px / focal_reference (focal_px: the focal length in pixels at the input size).
RELATIVE, UP_TO_SCALE, METRES, CANONICAL = "relative inverse depth", "depth up to scale", "metres", "canonical depth"
OUTPUT_MEANINGS = (RELATIVE, UP_TO_SCALE, METRES, CANONICAL)


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
    output_meaning: str  # one of OUTPUT_MEANINGS: drives the units everywhere (report, card, snippets, predict)
    focal_reference: float | None = None  # CANONICAL only: metres = value x focal_px / focal_reference
    licence_note: str = ""  # where the licence comes from, when the upstream cards leave doubt
    channel_dim: bool = False  # output [1, 1, H, W] instead of [1, H, W]
    pos_formula: str | None = None  # position-embedding resampling fixed by the architecture (else: the weights')
    hf_repo: str = ""  # transformers-format checkpoint on the Hub
    official_repo: str = ""  # the upstream repository's checkpoint on the Hub ...
    official_file: str = ""  # ... and its file there
    hidden: bool = False  # test-only: not listed by `depthport models`
    prompt_hw: tuple[int, int] | None = None  # default shape of a second input, the prompt depth in metres (Prompt
    # Depth Anything: a phone's LiDAR / ToF map); None for image-only models

    def __post_init__(self):
        for name in (self.config, self.tiny):
            if name not in self.arch.configs:
                raise ValueError(f"{self.id}: no {self.arch.name} config {name!r}")
        if self.output_space not in OUTPUT_SPACES:
            raise ValueError(f"{self.id}: output_space {self.output_space!r} is not one of {OUTPUT_SPACES}")
        if self.output_meaning not in OUTPUT_MEANINGS:
            raise ValueError(f"{self.id}: output_meaning {self.output_meaning!r} is not one of {OUTPUT_MEANINGS}")
        if (self.output_meaning == RELATIVE) != (self.output_space == "inverse depth"):
            raise ValueError(f"{self.id}: only relative inverse depth is in inverse-depth space")
        if (self.output_meaning == CANONICAL) != (self.focal_reference is not None):
            raise ValueError(f"{self.id}: canonical depth, and only it, needs focal_reference")
        if (self.output_meaning == METRES) != (self.max_depth is not None):
            raise ValueError(f"{self.id}: metres come from a head with max_depth, and only such a head gives them")

    @property
    def family(self) -> str:
        """The family's name, for display."""
        return self.arch.name

    @property
    def model_config(self):
        return self.arch.configs[self.config]

    @property
    def metric(self) -> bool:
        """The output is in metres, as it stands or with the camera's focal length."""
        return self.output_meaning in (METRES, CANONICAL)

    @property
    def prompted(self) -> bool:
        """The model takes a prompt depth map beside the image."""
        return self.prompt_hw is not None

    @property
    def needs_focal(self) -> bool:
        return self.output_meaning == CANONICAL

    @property
    def max_depth(self) -> float | None:
        """The head's full scale in metres (sigmoid x max_depth), None for other heads."""
        return getattr(getattr(self.model_config, "dpt", None), "max_depth", None)

    @property
    def non_commercial(self) -> bool:
        return "-NC" in self.licence.upper()

    def units(self) -> dict:
        """The output's units for report.json ``output_units`` (the card, snippets and predict read it)."""
        return output_units(self.output_meaning, self.max_depth, self.focal_reference, prompted=self.prompted)

    @property
    def pretrain_hw(self) -> tuple[int, int]:
        """The input shape the checkpoints were trained at (patch x pretraining grid), where neither upstream
        resamples the position embedding."""
        return self.model_config.vit.pretrain_hw

    def preprocess(self, image, hw: tuple[int, int], normalize: bool = True):
        return self.arch.preprocess(image, hw, normalize)

    def output_shape(self, input_hw: tuple[int, int]) -> list[int]:
        return [1, 1, *input_hw] if self.channel_dim else [1, *input_hw]


def focal_formula(focal_reference: float) -> str:
    """How canonical depth becomes metres, e.g. 'metres = value x focal_px / 300'."""
    return f"metres = value x focal_px / {focal_reference:g}"


def output_units(meaning: str, max_depth: float | None = None, focal_reference: float | None = None,
                 prompted: bool = False) -> dict:
    """What one output value is and how an app gets metres from it (``to_metres`` None where it cannot); ``label``
    names the unit in gates and reasons. ``prompted``: metres whose scale comes from the prompt depth input."""
    metric = meaning in (METRES, CANONICAL)
    if meaning == METRES and prompted:
        to_metres, label, max_depth = "depth_m = value", "m", None
        line = ("metres: each value is the distance in metres, between the prompt depth's minimum and maximum (a "
                "sigmoid stretched to the prompt's range); larger = farther")
    elif meaning == METRES:
        to_metres, label = "depth_m = value", "m"
        line = (f"metres: each value is the distance in metres, from 0 to {max_depth:g} m (sigmoid x {max_depth:g}); "
                "larger = farther")
    elif meaning == CANONICAL:
        to_metres, label = f"depth_m = value * focal_px / {focal_reference:g}", f"m at focal {focal_reference:g} px"
        line = (f"canonical depth: {focal_formula(focal_reference)}, focal_px being the camera's focal length in "
                "pixels at the model's input size; larger = farther")
    elif meaning == UP_TO_SCALE:
        to_metres, label, line = None, None, "no unit: depth up to an unknown scale (larger = farther); not metres"
    else:
        to_metres, label = None, None
        line = "no unit: relative inverse depth up to an unknown scale and shift (larger = nearer)"
    return {"meaning": meaning, "unit": "m" if metric else None, "label": label, "metric": metric,
            "max_depth_m": max_depth, "focal_reference_px": focal_reference, "to_metres": to_metres, "line": line}
