"""Resolve ``--weights`` (random, a local file or folder, a Hugging Face repo id) to depthport-named tensors."""

from __future__ import annotations

import os
import re
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..scratch import process_folder
from ..spec import ModelSpec
from . import formats
from .errors import WeightsError, WeightsUnavailable

if TYPE_CHECKING:
    import torch


# Weights at least this large are written to a temporary file by ``LoadedWeights.release`` (a Large model's 1.3 GB)
# and read back when next used; smaller ones stay in memory, where they cost less than the write.
RELEASE_BYTES = 512 << 20


@dataclass
class LoadedWeights:
    """Depthport-named tensors and where they came from. ``state`` is read back from a temporary safetensors file
    after ``release``."""

    _state: dict[str, torch.Tensor] | None
    source: str
    format: str
    random: bool = False
    revision: str | None = None
    base_models: tuple[str, ...] = ()  # what the checkpoint says it was fine-tuned from (`declared_base_models`)
    _spill: str | None = field(default=None, repr=False, compare=False)

    @property
    def state(self) -> dict[str, torch.Tensor]:
        if self._state is None:
            from safetensors.torch import load_file

            self._state = load_file(self._spill)
        return self._state

    def release(self, min_bytes: int | None = None) -> bool:
        """Free the tensors while nothing needs them, when they are ``min_bytes`` (default ``RELEASE_BYTES``) or
        more: written once to a temporary file (deleted with this object) and read back by the next use of
        ``state``. True if freed."""
        limit = RELEASE_BYTES if min_bytes is None else min_bytes
        if self._state is None or sum(t.numel() * t.element_size() for t in self._state.values()) < limit:
            return False
        if self._spill is None:
            from safetensors.torch import save_file

            fd, path = tempfile.mkstemp(prefix="weights-", suffix=".safetensors", dir=process_folder())
            os.close(fd)
            weakref.finalize(self, Path(path).unlink, missing_ok=True)
            seen: set[int] = set()
            tensors = {}
            for k, t in self._state.items():  # safetensors refuses tensors that share memory: those are copied
                ptr = t.untyped_storage().data_ptr()
                tensors[k] = t.detach().contiguous() if ptr not in seen else t.detach().clone()
                seen.add(ptr)
            save_file(tensors, path)
            self._spill = path
        self._state = None
        return True

    @property
    def argument(self) -> str:
        """What ``--weights`` takes to load these weights again: "random", "stress" or the source."""
        return self.format if self.format in ("random", "stress") else self.source

    @property
    def pos_formula(self) -> str:
        """The position-embedding resampling that matches the implementation the weights came with."""
        return "official" if self.format == "official" else "transformers"


def _read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    import torch

    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any read failure is reported as one line
        raise WeightsError(f"cannot read checkpoint {path}: {type(exc).__name__}: {exc}") from None
    if isinstance(state, dict) and "model" in state and isinstance(state["model"], dict):
        state = state["model"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"checkpoint {path} is not a state dict of tensors")
    return state


def _format_for(path: Path) -> tuple[formats.KeyMapFormat, Path]:
    if path.is_dir():
        if not (path / "model.safetensors").exists():
            raise WeightsError(f"{path} has no model.safetensors (expected a transformers-format checkpoint folder)")
        return formats.TRANSFORMERS, path / "model.safetensors"
    if path.suffix == ".safetensors":
        return _safetensors_format(path), path
    if path.suffix in (".pth", ".pt"):
        return formats.OFFICIAL, path
    raise WeightsError(f"unknown checkpoint type {path.name}: expected .pth (official), .safetensors or a folder")


# Key prefixes of the official Depth-Anything-V2 layout (DINOv2 under ``pretrained``, DPT as ``depth_head``), which
# some releases publish as .safetensors (Distill-Any-Depth's small/ and base/ folders).
OFFICIAL_PREFIXES = ("pretrained.", "depth_head.")


def _safetensors_format(path: Path) -> formats.KeyMapFormat:
    """A .safetensors file holds transformers names unless its keys have the official layout."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), "pt") as f:
            keys = list(f.keys())
    except Exception as exc:  # noqa: BLE001 - any read failure is reported as one line
        raise WeightsError(f"cannot read checkpoint {path}: {type(exc).__name__}: {exc}") from None
    return formats.OFFICIAL if any(k.startswith(OFFICIAL_PREFIXES) for k in keys) else formats.TRANSFORMERS


def _hub_file(repo_id: str, filename: str) -> Path:
    """A file from the Hugging Face cache, else the hub; offline, an error that says how to get it."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(hf_hub_download(repo_id, filename, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("0", "", "false"):
        reason = "offline mode (HF_HUB_OFFLINE) is on"
    else:
        try:
            return Path(hf_hub_download(repo_id, filename))
        except Exception as exc:  # noqa: BLE001 - network, auth and missing-repo errors all end here
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no answer'}"
    raise WeightsUnavailable(
        f"{filename} of {repo_id} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and could not be "
        f"downloaded ({reason}); run `hf download {repo_id} {filename}` on a connected machine, or pass "
        "--weights PATH or --weights random"
    )


def _optional_hub_file(repo_id: str, filename: str) -> Path | None:
    """A small side file of a hub repo (its model card) when the cache or the hub has it; None otherwise."""
    try:
        return _hub_file(repo_id, filename)
    except WeightsUnavailable:
        return None


REPO_ID = re.compile(r"[\w.-]+/[\w.-]+")


def declared_base_models(folder: Path, card: Path | None, own_repo: str | None) -> tuple[str, ...]:
    """The Hub ids a checkpoint names as what it was fine-tuned from: ``base_model`` in its model card's front
    matter (README.md), else ``_name_or_path`` in the transformers ``config.json`` beside it when that is another
    repo. Unreadable or absent files say nothing."""
    from huggingface_hub import metadata_load

    try:
        meta = metadata_load(card) if card is not None and card.is_file() else None
    except Exception:  # noqa: BLE001 - a malformed card is as good as none: it only annotates the report
        meta = None
    named = (meta or {}).get("base_model")
    names = [named] if isinstance(named, str) else list(named or [])
    if not names and (folder / "config.json").is_file():
        import json

        try:
            names = [json.loads((folder / "config.json").read_text()).get("_name_or_path") or ""]
        except (OSError, ValueError, AttributeError):
            names = []
    return tuple(n for n in names if isinstance(n, str) and REPO_ID.fullmatch(n) and n != own_repo)


def _revision_of(path: Path) -> str | None:
    parts = path.parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts else None


def load_weights(spec: ModelSpec, weights: str, expected: dict[str, torch.Size]) -> LoadedWeights:
    """Weights for ``spec`` from a local path or a hub repo id (``hf://`` prefix allowed, as report.json
    records it), checked key by key against ``expected``."""
    weights = weights.removeprefix("hf://")
    path = Path(weights).expanduser()
    looks_like_file = path.suffix in (".pth", ".pt", ".safetensors") or weights.startswith((".", "/", "~"))
    if path.exists():
        fmt, file = _format_for(path)
        source, card = str(path), file.parent / "README.md"
    elif looks_like_file:
        raise WeightsError(f"checkpoint not found: {weights}")
    elif REPO_ID.fullmatch(weights):
        if weights == spec.official_repo:
            fmt, file = formats.OFFICIAL, _hub_file(weights, spec.official_file)
        else:
            fmt, file = formats.TRANSFORMERS, _hub_file(weights, "model.safetensors")
            _hub_file(weights, "config.json")
        source, card = f"hf://{weights}", _optional_hub_file(weights, "README.md")
    else:
        raise WeightsError(f"weights {weights!r}: not 'random', 'stress', an existing file or folder, or a Hugging Face repo id")
    fmt = _family_format(spec, fmt, source)
    check_head(spec, fmt, file, source)
    state = fmt.to_depthport(_read_state_dict(file), expected, source)
    bases = declared_base_models(file.parent, card, weights if source.startswith("hf://") else None)
    return LoadedWeights(state, source, fmt.name, revision=_revision_of(file), base_models=bases)


def _family_format(spec: ModelSpec, layout: formats.KeyMapFormat, source: str) -> formats.KeyMapFormat:
    """The key map of ``spec``'s family for a checkpoint in ``layout`` (transformers or official names)."""
    for fmt in spec.arch.weight_formats:
        if fmt.name == layout.name:
            return fmt
    known = " or ".join(f.name for f in spec.arch.weight_formats)
    raise WeightsError(f"{source} has {layout.name} key names, but {spec.id} checkpoints come in {known} layout")


# Official metric checkpoints name their training set: Hypersim (indoor, 20 m) or Virtual KITTI 2 (outdoor, 80 m).
OFFICIAL_METRIC_DEPTH = {"hypersim": 20.0, "vkitti": 80.0}


def check_head(spec: ModelSpec, fmt: formats.KeyMapFormat, file: Path, source: str) -> None:
    """A relative and a metric Depth Anything V2 checkpoint have the same keys, and so do an indoor and an outdoor
    one: what tells them apart is the transformers ``config.json`` beside the weights (``depth_estimation_type``,
    ``max_depth``) or the official file's name. Where either says, it must agree with ``spec``'s head; otherwise
    the depth would be silently wrong (metres on the wrong scale, or a sigmoid head read as ReLU)."""
    want = "metric" if spec.max_depth is not None else "relative"
    if fmt.name == formats.TRANSFORMERS.name and (file.parent / "config.json").is_file():
        import json

        try:
            config = json.loads((file.parent / "config.json").read_text())
        except (OSError, ValueError) as exc:
            raise WeightsError(f"cannot read {file.parent / 'config.json'}: {exc}") from None
        kind, depth = config.get("depth_estimation_type", "relative"), config.get("max_depth")
        where = "its config.json"
        prompted = config.get("model_type") == "prompt_depth_anything"
        if "model_type" in config and prompted != spec.prompted:
            raise WeightsError(f"{source} is a {config['model_type']} checkpoint ({where}) but {spec.id} "
                               f"{'takes' if spec.prompted else 'does not take'} a prompt depth: pick "
                               f"{'a prompt-da-* id' if prompted else 'the da2-* id of the same size'}")
    elif fmt.name == formats.OFFICIAL.name:
        tags = [tag for tag in OFFICIAL_METRIC_DEPTH if f"metric_{tag}" in file.name]
        if not tags:
            return  # a relative name, or a renamed file: nothing to compare
        kind, depth, where = "metric", OFFICIAL_METRIC_DEPTH[tags[0]], "its file name"
    else:
        return
    if kind != want:
        raise WeightsError(f"{source} is a {kind} depth checkpoint ({where}) but {spec.id} is {want}: pick the "
                           f"{'da2-metric-*' if kind == 'metric' else 'relative da2-*'} id of the same size")
    if kind == "metric" and depth is not None and float(depth) != spec.max_depth:
        raise WeightsError(f"{source} was trained to max_depth {float(depth):g} m ({where}) but {spec.id} has "
                           f"{spec.max_depth:g} m (da2-metric-indoor-*: 20 m, da2-metric-outdoor-*: 80 m)")

