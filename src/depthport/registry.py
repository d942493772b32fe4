"""Model ids: which family and size, which upstream weights, which licence, which default export shape.

Adding a size is one entry here plus its config in `models.configs`; adding a family is a `families` module too.
Every id names a ``tiny`` config, and that config is registered as a hidden id: the tests export it.
"""

from __future__ import annotations

import difflib

from .errors import InputError
from .families.da2 import DA2
from .families.da3 import DA3
from .families.da3_mono import DA3_MONO
from .families.prompt_da import ARKIT_PROMPT_HW, PROMPT_DA
from .spec import CANONICAL, METRES, RELATIVE, UP_TO_SCALE, ModelSpec

__all__ = ["MODELS", "ModelSpec", "get_spec", "image_only_spec", "tiny_spec"]

DA2_OUTPUT = "relative inverse depth (larger = nearer), shape [1, H, W]"
DA2_METRIC_OUTPUT = "metric depth in metres (larger = farther), sigmoid x max_depth, shape [1, H, W]"
DA3_OUTPUT = "depth up to scale (larger = farther), exp of the head's logit, shape [1, 1, H, W]"
DA3_METRIC_OUTPUT = ("canonical metric depth (larger = farther; metres = value x focal_px / 300), exp of the head's "
                     "logit, shape [1, 1, H, W]")
PROMPT_DA_OUTPUT = ("metric depth in metres (larger = farther): a sigmoid stretched to the prompt depth's "
                    "[min, max], shape [1, H, W]")
# Upstream runs at a long side of 1008 (PromptDA's load_image, multiple of 14): ARKit's 1920x1440 -> 756x1008,
# the 4:3 of the 192x256 prompt. Both shapes are overridable (--size, --prompt-size); portrait is 1008x756, 256x192.
_PROMPT_DA = dict(arch=PROMPT_DA, tiny="tiny", output=PROMPT_DA_OUTPUT, output_space="depth", output_meaning=METRES,
                  default_hw=(756, 1008), prompt_hw=ARKIT_PROMPT_HW, licence="Apache-2.0")
_PROMPT_DA_NOTE = "Apache-2.0 on the Hub card of {repo} and in the DepthAnything/PromptDA repository's LICENSE"
_DA2 = dict(arch=DA2, tiny="tiny", output=DA2_OUTPUT, output_space="inverse depth", output_meaning=RELATIVE)
_DA2_METRIC = dict(arch=DA2, tiny="metric-tiny", output=DA2_METRIC_OUTPUT, output_space="depth",
                   output_meaning=METRES, default_hw=(518, 686))
_DA3 = dict(arch=DA3, tiny="tiny", output=DA3_OUTPUT, output_space="depth", output_meaning=UP_TO_SCALE,
            channel_dim=True, pos_formula="official")
_DA3_MONO = dict(arch=DA3_MONO, channel_dim=True, pos_formula="official", output_space="depth")
_DA3_METRIC = dict(tiny="metric-tiny", output=DA3_METRIC_OUTPUT, output_meaning=CANONICAL, focal_reference=300.0,
                   **_DA3_MONO)
_DA3_MONO_LARGE = dict(tiny="mono-tiny", output=DA3_OUTPUT, output_meaning=UP_TO_SCALE, **_DA3_MONO)

# Licences, from the Hub cards and the upstream READMEs (see each note).
_METRIC_SMALL_NOTE = ("the official checkpoint's Hub card is tagged apache-2.0 and the -hf card has no licence tag; "
                      "fine-tuned from Depth-Anything-V2-Small, whose weights are Apache-2.0")
_METRIC_NC_NOTE = ("treated as non-commercial: fine-tuned from Depth-Anything-V2-{size}, whose weights are "
                   "CC-BY-NC-4.0 (upstream README); the official checkpoint's Hub card is tagged apache-2.0 while the "
                   "-hf card has no licence tag, and upstream has not said which applies "
                   "(Depth-Anything-V2 issue #245)")
_DA3_NOTE = "Depth Anything 3 README model table: {name} weights are Apache 2.0"
_DAD_NOTE = ("Distill-Any-Depth: the Hub card of xingyang1/Distill-Any-Depth is tagged apache-2.0 and the GitHub "
             "repository's LICENSE (Westlake-AGI-Lab/Distill-Any-Depth) is MIT; both permit commercial use. The "
             "{size} checkpoint has the Depth Anything V2 architecture (upstream loads it with DepthAnythingV2)")
_SCENES = {"indoor": ("Indoor", "Hypersim", "hypersim"), "outdoor": ("Outdoor", "VKITTI", "vkitti")}
_SIZES = {"small": ("Small", "s"), "base": ("Base", "b"), "large": ("Large", "l")}


def _da2_metric(scene: str, size: str) -> ModelSpec:
    """da2-metric-{indoor,outdoor}-{small,base,large}: transformers' -hf repo and the official metric .pth."""
    name, dataset, file_tag = _SCENES[scene]
    size_name, letter = _SIZES[size]
    licence, note = (("Apache-2.0", _METRIC_SMALL_NOTE) if size == "small"
                     else ("CC-BY-NC-4.0", _METRIC_NC_NOTE.format(size=size_name)))
    return ModelSpec(id=f"da2-metric-{scene}-{size}", config=f"metric-{scene}-{size}", licence=licence,
                     licence_note=note, hf_repo=f"depth-anything/Depth-Anything-V2-Metric-{name}-{size_name}-hf",
                     official_repo=f"depth-anything/Depth-Anything-V2-Metric-{dataset}-{size_name}",
                     official_file=f"depth_anything_v2_metric_{file_tag}_vit{letter}.pth", **_DA2_METRIC)

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
        ModelSpec(id="distill-any-depth-small", config="small", licence="Apache-2.0", default_hw=(518, 686),
                  licence_note=_DAD_NOTE.format(size="small"), hf_repo="xingyang1/Distill-Any-Depth-Small-hf",
                  official_repo="xingyang1/Distill-Any-Depth", official_file="small/model.safetensors", **_DA2),
        ModelSpec(id="distill-any-depth-base", config="base", licence="Apache-2.0", default_hw=(518, 686),
                  licence_note=_DAD_NOTE.format(size="base") + "; there is no transformers-format (-hf) release",
                  official_repo="xingyang1/Distill-Any-Depth", official_file="base/model.safetensors", **_DA2),
        *(ModelSpec(id=f"prompt-da-{name}", config=config, hf_repo=repo, licence_note=_PROMPT_DA_NOTE.format(repo=repo),
                    **_PROMPT_DA)
          for name, config, repo in [("small", "small", "depth-anything/prompt-depth-anything-vits-hf"),
                                     ("large", "large", "depth-anything/prompt-depth-anything-vitl-hf"),
                                     ("small-transparent", "small",
                                      "depth-anything/prompt-depth-anything-vits-transparent-hf")]),
        ModelSpec(id="prompt-da-tiny", config="tiny", hidden=True, **{**_PROMPT_DA, "default_hw": (56, 70)}),
        ModelSpec(id="da2-tiny", config="tiny", licence="Apache-2.0", default_hw=(56, 70), hidden=True, **_DA2),
        *(_da2_metric(scene, size) for scene in _SCENES for size in _SIZES),
        ModelSpec(id="da2-metric-tiny", config="metric-tiny", licence="Apache-2.0", hidden=True,
                  **{**_DA2_METRIC, "default_hw": (56, 70)}),
        ModelSpec(id="da3-small", config="small", licence="Apache-2.0", default_hw=(896, 504),
                  official_repo="depth-anything/DA3-SMALL", official_file="model.safetensors", **_DA3),
        ModelSpec(id="da3-tiny", config="tiny", licence="Apache-2.0", default_hw=(70, 42), hidden=True, **_DA3),
        ModelSpec(id="da3-base", config="base", licence="Apache-2.0", default_hw=(896, 504),
                  licence_note=_DA3_NOTE.format(name="DA3-BASE"),
                  official_repo="depth-anything/DA3-BASE", official_file="model.safetensors", **_DA3),
        ModelSpec(id="da3-metric-large", config="da3metric-large", licence="Apache-2.0", default_hw=(896, 504),
                  licence_note=_DA3_NOTE.format(name="DA3METRIC-LARGE"),
                  official_repo="depth-anything/DA3METRIC-LARGE", official_file="model.safetensors", **_DA3_METRIC),
        ModelSpec(id="da3-mono-large", config="da3mono-large", licence="Apache-2.0", default_hw=(896, 504),
                  licence_note=_DA3_NOTE.format(name="DA3MONO-LARGE"),
                  official_repo="depth-anything/DA3MONO-LARGE", official_file="model.safetensors", **_DA3_MONO_LARGE),
        ModelSpec(id="da3-metric-tiny", config="metric-tiny", licence="Apache-2.0", default_hw=(70, 42), hidden=True,
                  **_DA3_METRIC),
        ModelSpec(id="da3-mono-tiny", config="mono-tiny", licence="Apache-2.0", default_hw=(70, 42), hidden=True,
                  **_DA3_MONO_LARGE),
    ]
}


def get_spec(model_id: str) -> ModelSpec:
    """The spec of a model id; also of the id in other letter case, or of the Hugging Face repository a user copies
    from the model's page (depth-anything/Depth-Anything-V2-Small-hf -> da2-small). Anything else is an InputError
    with the closest ids, if any, and every supported one."""
    if model_id in MODELS:
        return MODELS[model_id]
    key = model_id.strip().strip("/").lower()
    named = [s for s in MODELS.values() if key and not s.hidden and key in (s.id, s.hf_repo.lower())]
    if key and not named:  # an upstream repository that holds one model's checkpoint (not Distill-Any-Depth's two)
        named = [s for s in MODELS.values() if not s.hidden and key == s.official_repo.lower()]
    if len(named) == 1:
        return named[0]
    known = [k for k, s in MODELS.items() if not s.hidden]
    close = difflib.get_close_matches(key.rsplit("/", 1)[-1], known, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    raise InputError(f"unknown model {model_id!r}{hint}; supported: {', '.join(known)}")


def image_only_spec(model_id: str, what: str) -> ModelSpec:
    """``get_spec`` for a command (``what``) that feeds one image: a prompted model is refused in one line."""
    spec = get_spec(model_id)
    if spec.prompted:
        raise InputError(f"{spec.id} takes a prompt depth map beside the image, and {what} feeds one image; "
                         f"export it (`depthport export {spec.id}`: every target takes the prompt) and use "
                         "`depthport verify` or `depthport predict --prompt` on the file")
    return spec



def tiny_spec(spec: ModelSpec) -> ModelSpec:
    """The registered id of ``spec``'s tiny config (same family, config ``spec.tiny``)."""
    for candidate in MODELS.values():
        if candidate.arch is spec.arch and candidate.config == spec.tiny:
            return candidate
    raise LookupError(f"{spec.id}: its tiny config {spec.tiny!r} is not a registered id")
