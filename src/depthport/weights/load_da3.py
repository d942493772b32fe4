"""Resolve ``--weights`` for Depth Anything 3: a .safetensors/.pth file, a folder holding model.safetensors,
or a hub repo id (``depth-anything/DA3-SMALL``: ``model.safetensors``, as the package's
``PyTorchModelHubMixin`` publishes it), read with the family's key map (`keymaps_da3`); random weights get an
exp-aware output calibration.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from torch import nn

from ..spec import ModelSpec
from .errors import WeightsError
from .load import LoadedWeights, _hub_file, _read_state_dict, _revision_of
from .random_init import init_random, recentre_logits

HUB_FILE = "model.safetensors"


def load_da3_weights(spec: ModelSpec, weights: str, expected: dict[str, torch.Size]) -> LoadedWeights:
    path = Path(weights).expanduser()
    if path.is_dir():
        file = path / HUB_FILE
        if not file.exists():
            raise WeightsError(f"{path} has no {HUB_FILE} (expected a Depth Anything 3 checkpoint folder)")
        source = str(path)
    elif path.exists():
        if path.suffix not in (".safetensors", ".pth", ".pt"):
            raise WeightsError(f"unknown checkpoint type {path.name}: expected .safetensors, .pth or a folder")
        file, source = path, str(path)
    elif path.suffix in (".pth", ".pt", ".safetensors") or weights.startswith((".", "/", "~")):
        raise WeightsError(f"checkpoint not found: {weights}")
    elif re.fullmatch(r"[\w.-]+/[\w.-]+", weights):
        file, source = _hub_file(weights, HUB_FILE), f"hf://{weights}"
    else:
        raise WeightsError(f"weights {weights!r}: not 'random', an existing file or folder, or a Hugging Face repo id")
    check_preset(spec, file, source)
    fmt = spec.arch.weight_formats[0]
    state = fmt.to_depthport(_read_state_dict(file), expected, source)
    return LoadedWeights(state, source, fmt.name, revision=_revision_of(file))


# The package's preset of each public id: its hub mixin writes it to config.json as ``model_name``.
PACKAGE_PRESETS = {"da3-small": "da3-small", "da3-base": "da3-base", "da3-metric-large": "da3metric-large",
                   "da3-mono-large": "da3mono-large"}


def check_preset(spec: ModelSpec, file: Path, source: str) -> None:
    """DA3Metric-Large and DA3Mono-Large have the same keys and shapes: only the ``config.json`` beside the weights
    (``model_name``) tells them apart. Where it names another preset than ``spec``'s, refuse: metric depth read as
    relative depth, or the reverse, would be silently wrong."""
    want, config = PACKAGE_PRESETS.get(spec.id), file.parent / "config.json"
    if want is None or not config.is_file():
        return
    import json

    try:
        name = json.loads(config.read_text()).get("model_name")
    except (OSError, ValueError, AttributeError) as exc:
        raise WeightsError(f"cannot read {config}: {exc}") from None
    if name and name != want:
        ids = {v: k for k, v in PACKAGE_PRESETS.items()}
        hint = f": use {ids[name]}" if name in ids else ""
        raise WeightsError(f"{source} is the depth-anything-3 preset {name!r} (its config.json) but {spec.id} is "
                           f"{want!r}{hint}")


@torch.no_grad()
def init_random_da3(model: nn.Module, seed: int = 0, logit_std: float = 0.5) -> nn.Module:
    """`init_random`, with the camera token drawn too and the output logits re-centred for exp().

    `init_random` calibrates the last conv to logits of mean 3 and std 1; depth = exp(logit) would then span
    e^1..e^5. The affine map below moves that to mean 0 and std ``logit_std`` (depth around 1, a factor of
    about e^(2*logit_std) either way), without another forward pass.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    for name, param in model.named_parameters():
        if name.endswith("camera_token"):
            param.copy_(torch.randn(param.shape, generator=gen) * 0.5)
    head = model.head
    confidence = getattr(head, "confidence", None)  # DualDPT only; the monocular DPT calls its last conv itself
    if confidence is not None:
        head.confidence = True  # the calibration hooks the last conv as a module call: the two-output form
    try:
        init_random(model, seed)
    finally:
        if confidence is not None:
            head.confidence = confidence
    recentre_logits(head.out_conv3, 0.0, logit_std)
    return model
