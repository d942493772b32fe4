"""model id + weights + export shape -> a loaded, rewritten PyTorch model ready for export."""

from __future__ import annotations

import copy
import os
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import torch
from torch import nn

from . import rewrites as rw
from .core.memory import give_back
from .registry import get_spec
from .scratch import process_folder
from .spec import ModelSpec
from .weights import LoadedWeights
from .weights import load as weights_load

# Random weights are drawn, and their output calibrated, on a model built at this shape, for every config: the
# released models' pretraining shape. Kept fixed (not ``spec.pretrain_hw``) so a seed gives the same tensors.
RANDOM_CALIBRATION_HW = (518, 518)


@dataclass
class Built:
    """The rewritten model and what it was built from. ``model`` is read back from a temporary file after
    ``release``."""

    _model: nn.Module
    spec: ModelSpec
    weights: LoadedWeights
    input_hw: tuple[int, int]
    pos_formula: str
    rewrites: list[str] = field(default_factory=list)
    _spill: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        self.parameter_count = sum(p.numel() for p in self._model.parameters())

    @property
    def model(self) -> nn.Module:
        if self._spill is not None:
            from safetensors import safe_open

            # Each tensor copied into fresh memory: safetensors' own can sit at any byte offset, and unaligned
            # weights take other (not bit-identical) kernels on some CPUs (AVX2).
            with safe_open(self._spill, "pt") as stored:
                for name, t in _tensors(self._model).items():
                    t.data = stored.get_tensor(name).clone()
            Path(self._spill).unlink(missing_ok=True)
            self._spill = None
        return self._model

    def release(self, min_bytes: int | None = None) -> bool:
        """Free the model's tensors while no stage needs it, when they are ``min_bytes`` (default: as for weights,
        ``weights.load.RELEASE_BYTES``) or more, a Large model's 1.3 GB: written to a temporary safetensors file and
        read back into the same parameters and buffers by the next use of ``model``. True if freed."""
        if self._spill is not None:
            return True
        tensors = _tensors(self._model)
        limit = weights_load.RELEASE_BYTES if min_bytes is None else min_bytes
        if sum(t.numel() * t.element_size() for t in tensors.values()) < limit:
            return False
        from safetensors.torch import save_file

        fd, path = tempfile.mkstemp(prefix="model-", suffix=".safetensors", dir=process_folder())
        os.close(fd)
        weakref.finalize(self, Path(path).unlink, missing_ok=True)
        seen: set[int] = set()
        stored = {}
        for name, t in tensors.items():  # safetensors refuses tensors that share memory: those are copied
            ptr = t.untyped_storage().data_ptr()
            stored[name] = t.detach().contiguous() if ptr not in seen else t.detach().clone()
            seen.add(ptr)
        save_file(stored, path)
        del stored
        for t in tensors.values():
            t.data = torch.empty(0, dtype=t.dtype)
        self._spill = path
        return True

    @property
    def prompt_hw(self) -> tuple[int, int] | None:
        """The prompt depth input's shape of a prompted model, else None."""
        return getattr(self._model, "prompt_hw", None)


def _tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer (non-persistent ones included) by name, each once."""
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def architecture(spec: ModelSpec, input_hw: tuple[int, int], pos_formula: str, confidence: bool = False,
                 prompt_hw: tuple[int, int] | None = None) -> nn.Module:
    """The reference-form model of ``spec``'s family and config for one input shape (no weights loaded); a
    prompted model takes its prompt at ``prompt_hw`` (default: the spec's)."""
    prompt = {"prompt_hw": tuple(prompt_hw or spec.prompt_hw)} if spec.prompted else {}
    return spec.arch.build_model(spec.model_config, tuple(input_hw), pos_formula, confidence, **prompt)


def random_weights(spec: ModelSpec, seed: int = 0) -> LoadedWeights:
    template = architecture(spec, RANDOM_CALIBRATION_HW, "official")
    spec.arch.init_random(template, seed)
    return LoadedWeights({k: v.detach().clone() for k, v in template.state_dict().items()},
                         f"random (seed {seed})", "random", random=True)


def resolve_weights(spec: ModelSpec, weights: str | LoadedWeights, seed: int = 0) -> LoadedWeights:
    """``weights`` as given, seeded random weights for "random" ("stress": with trained-weight outliers planted,
    ``weights.stress``), else the family's loader for a file, folder or hub repo id, checked key by key against the
    architecture."""
    if isinstance(weights, LoadedWeights):
        return weights
    if weights == "random":
        return random_weights(spec, seed)
    if weights == "stress":
        from .weights.stress import plant_outliers

        return plant_outliers(random_weights(spec, seed), spec.model_config.vit.heads, seed)
    template = architecture(spec, spec.pretrain_hw, "official")
    return spec.arch.load_weights(spec, weights, {k: v.shape for k, v in template.state_dict().items()})


def build(model_id: str | ModelSpec, input_hw: tuple[int, int], weights: str | LoadedWeights = "random",
          rewrites: list[str] | None = None, pos_formula: str | None = None, confidence: bool = False,
          prompt_hw: tuple[int, int] | None = None) -> Built:
    """Architecture for ``input_hw``, strictly loaded, with ``rewrites`` applied (defaults: the export set).

    ``confidence`` (Depth Anything 3 only) adds the head's confidence map as a second output; ``prompt_hw``
    (Prompt Depth Anything only) is the prompt depth input's shape, the spec's by default. The rewrites run
    in float64 and the result is cast to float32 once, so folded weights are rounded once, not at every fold.
    """
    spec, loaded, formula, model = _loaded64(model_id, input_hw, weights, pos_formula, confidence, prompt_hw)
    names = rw.default_rewrites() if rewrites is None else list(rewrites)
    rw.apply(model, names)
    return Built(model.float().eval(), spec, loaded, tuple(input_hw), formula, names)


def _loaded64(model_id, input_hw, weights, pos_formula, confidence=False, prompt_hw=None):
    """(spec, weights, position formula, the architecture for ``input_hw`` in float64, strictly loaded)."""
    spec = model_id if isinstance(model_id, ModelSpec) else get_spec(model_id)
    loaded = resolve_weights(spec, weights)
    formula = pos_formula or spec.pos_formula or loaded.pos_formula
    model = architecture(spec, input_hw, formula, confidence, prompt_hw).double()
    model.load_state_dict(loaded.state, strict=True)
    return spec, loaded, formula, model


def build_steps(model_id: str | ModelSpec, input_hw: tuple[int, int], weights: str | LoadedWeights,
                rewrites: list[str], pos_formula: str | None = None,
                prompt_hw: tuple[int, int] | None = None) -> Iterator[tuple[str | None, nn.Module]]:
    """The model exactly as ``build`` makes it with each prefix of ``rewrites``: (None, no rewrite), then
    (name, the model with the rewrites up to ``name``). One float64 model is loaded and rewritten step by step;
    each step is yielded as a float32 copy (what the rewrite ledger measures, for the cost of one build). Large
    weights are released (``LoadedWeights.release``) once the float64 model holds them."""
    _, loaded, _, model = _loaded64(model_id, input_hw, weights, pos_formula, prompt_hw=prompt_hw)
    if loaded.release():  # the weights (a Large model's 1.3 GB) wait on disk: the float64 model holds them now
        give_back()
    yield None, float_copy(model)
    for name in rw.applied(model, list(rewrites)):
        yield name, float_copy(model)


def float_copy(model: nn.Module) -> nn.Module:
    """``copy.deepcopy(model).float()`` without the float64 copy in between: each floating-point parameter and
    buffer is cast on its own (a Large model's float64 copy alone is 2.7 GB)."""
    memo = {}
    for t in (*model.parameters(), *model.buffers()):
        if t.is_floating_point():
            cast = t.detach().float()
            memo[id(t)] = nn.Parameter(cast, t.requires_grad) if isinstance(t, nn.Parameter) else cast
    return copy.deepcopy(model, memo).float().eval()
