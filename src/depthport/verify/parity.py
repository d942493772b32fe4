"""Run an exported file and the PyTorch references on identical preprocessed inputs, and compare."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from ..core import metrics
from ..core.schema import ParityJson
from ..errors import InputError
from ..preprocess import to_tensor
from ..runtimes.torch import TorchRunner


def check_shapes(runner, input_hw: tuple[int, int], name: str) -> None:
    """The file must take (1, 3, H, W) at the reference's shape."""
    shape = tuple(int(d) for d in runner.input_shape)
    if len(shape) != 4 or shape[:2] != (1, 3):
        raise InputError(f"{name} does not take one RGB image: its input is {list(shape)}")
    if shape[2:] != tuple(input_hw) and not getattr(runner, "dynamic", False):  # onnx-dynamic takes any H x W
        raise InputError(f"shape mismatch: {name} takes {shape[2]}x{shape[3]} but the reference runs at "
                         f"{input_hw[0]}x{input_hw[1]}")


def depth_of(runner, x: np.ndarray, input_hw: tuple[int, int], name: str, *extra: np.ndarray) -> np.ndarray:
    """The (H, W) depth of ``runner`` for the image ``x`` (and the file's further inputs ``extra``)."""
    out = np.asarray(runner.run(x, *extra), np.float32)
    if out.size != input_hw[0] * input_hw[1]:
        raise InputError(f"shape mismatch: {name} returns {list(out.shape)}, the reference {[1, *input_hw]}")
    return out.reshape(input_hw)


@dataclass
class References:
    """Inputs and reference outputs per image, each computed once.

    ``reference`` is the upstream implementation (transformers); ``eager`` is depthport's own PyTorch model
    with the rewrites the file was exported with, which isolates the converter's share of the error;
    ``reference64`` (optional) is the upstream model in float64, free of the float32 reference's own rounding.
    Inputs are stretched to ``input_hw`` (bicubic) and ImageNet-normalised; files whose normalisation was
    folded in get the same pixels un-normalised. ``prompts`` (prompted models only) holds each image's (1, 1, h, w)
    prompt depth, fed after the image to every model and file.
    """

    images: list[tuple[str, Image.Image]]
    input_hw: tuple[int, int]
    reference: TorchRunner
    eager: TorchRunner | None = None
    eager_normalized: bool = True
    label: str = "upstream reference"
    reference64: TorchRunner | None = None
    spec: object = None  # the ModelSpec: its output's space and units (accuracy, gates in metres)
    cache: object = None  # a core.evidence_cache.EvidenceCache for the upstream outputs, or None
    cache_id: tuple = ()  # (model id, weights digest): with the label and the input, the cache key
    prompts: dict | None = None
    fp64_count: int | None = None  # the float64 reference runs on the first this-many images (the evidence budget)
    eager_count: int | None = None  # and depthport's eager model (the converter's share of the error) too
    eager_id: tuple = ()  # what the eager model is beyond cache_id (its rewrites...): its outputs are cached too
    parity_count: int | None = None  # the files and the FP32 reference run on this many images (the evidence budget)
    keep: str | None = None  # the image every subset holds: the ground-truth scene, whose outputs score accuracy
    _inputs: dict = field(default_factory=dict)
    _outputs: dict = field(default_factory=dict)

    def at(self, hw: tuple[int, int], threads: int, eager_model=None, fp64: bool = True) -> References:
        """The same images and upstream model (and, with ``fp64``, float64 when there is one) at another shape,
        with ``eager_model`` (depthport's model built for that shape) as the eager reference, or none."""
        extra = self.reference.extra_shapes
        ref64 = (TorchRunner(self.reference64.built, hw, threads, "reference-eager-fp64", self.reference64.dtype,
                             extra, self.reference64.rebuild) if fp64 and self.reference64 is not None else None)
        eager = TorchRunner(eager_model, hw, threads, "depthport-eager") if eager_model is not None else None
        return References(self.images, hw, TorchRunner(self.reference.built, hw, threads, "reference-eager",
                                                       extra_shapes=extra, rebuild=self.reference.rebuild), eager,
                          self.eager_normalized, self.label, ref64, spec=self.spec, cache=self.cache,
                          cache_id=self.cache_id, prompts=self.prompts, fp64_count=self.fp64_count,
                          eager_count=self.eager_count, parity_count=self.parity_count, keep=self.keep)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.images]

    @property
    def parity_names(self) -> list[str]:
        """The images the files and the FP32 reference run on, in the set's order: all, or ``keep`` (when the set
        holds it) and the first others up to ``parity_count``."""
        names = self.names
        if not self.parity_count or self.parity_count >= len(names):
            return names
        keep = self.keep if self.keep in names else None
        others = [n for n in names if n != keep][:self.parity_count - (keep is not None)]
        return [n for n in names if n == keep or n in others]

    @property
    def fp64_names(self) -> list[str]:
        """The images the float64 reference runs on: all parity images, or the first ``fp64_count``."""
        return self.parity_names[:self.fp64_count] if self.fp64_count else self.parity_names

    @property
    def eager_names(self) -> list[str]:
        """The images depthport's eager model runs on: all parity images, or the first ``eager_count``."""
        return self.parity_names[:self.eager_count] if self.eager_count else self.parity_names

    def input(self, name: str, normalized: bool = True) -> np.ndarray:
        key = (name, normalized)
        if key not in self._inputs:
            self._inputs[key] = to_tensor(dict(self.images)[name], self.input_hw, normalize=normalized)
        return self._inputs[key]

    def extra(self, name: str) -> tuple[np.ndarray, ...]:
        """The inputs after the image for ``name``: its prompt for a prompted model, else none."""
        return (self.prompts[name],) if self.prompts else ()

    def _entry(self, which: str, name: str) -> str | None:
        """The evidence cache's key of one output, or None when it is not cached."""
        what = (self.label,) if which != "eager" else ("depthport-eager", *self.eager_id) if self.eager_id else None
        if self.cache is None or not self.cache_id or not what:
            return None
        x = self.input(name, which != "eager" or self.eager_normalized)
        return self.cache.key(*self.cache_id, *what, which, arrays=(x, *self.extra(name)))

    def output(self, which: str, name: str) -> np.ndarray:
        """'reference', 'eager' or 'reference64' depth (H, W) for one image."""
        key = (which, name)
        if key not in self._outputs:
            runner = {"reference": self.reference, "eager": self.eager, "reference64": self.reference64}[which]
            if runner is None:
                raise ValueError(f"no {which} model")
            entry = self._entry(which, name)
            out = self.cache.get(entry) if entry else None
            if out is None:
                x = self.input(name, which != "eager" or self.eager_normalized)
                out = depth_of(runner, x, self.input_hw, which, *self.extra(name))
                if entry:
                    self.cache.put(entry, out)
            self._outputs[key] = out
        return self._outputs[key]

    def seed_eager(self, outputs: dict[str, np.ndarray]) -> None:
        """Take depthport's eager outputs computed elsewhere from the same model and inputs (the FP16-compute
        prediction's FP32 runs), as if ``output("eager", name)`` had run them; kept in the cache too."""
        for name, out in outputs.items():
            if self.eager is None or name not in self.names or ("eager", name) in self._outputs:
                continue
            out = np.asarray(out, np.float32).reshape(self.input_hw)
            entry = self._entry("eager", name)
            if entry:
                self.cache.put(entry, out)
            self._outputs[("eager", name)] = out


def run_file(runner, refs: References, name: str, normalized: bool = True, on_image=None) -> dict[str, np.ndarray]:
    """Depth (H, W) of the file for every image; ``on_image(done)`` after each."""
    check_shapes(runner, refs.input_hw, name)
    out = {}
    for i, img in enumerate(refs.parity_names, 1):
        out[img] = depth_of(runner, refs.input(img, normalized), refs.input_hw, name, *refs.extra(img))
        if on_image is not None:
            on_image(i)
    return out


def compare(outputs: dict[str, np.ndarray], refs: References, which: str = "reference") -> dict:
    """Summary (worst/median/pooled) plus per-image figures of ``outputs`` against one reference."""
    per_image = {img: metrics.image_metrics(out, refs.output(which, img)) for img, out in outputs.items()}
    summary = metrics.summarize(list(per_image.values()))
    return {**summary, "per_image": {img: metrics.public(m) for img, m in per_image.items()}}


def upstream_fp64_error(refs: References) -> float:
    """Pooled rel. L2 of the upstream float32 reference against itself in float64: the floor of FP32 parity."""
    outputs = {img: refs.output("reference", img) for img in refs.fp64_names}
    return ParityJson(compare(outputs, refs, "reference64")).rel_l2_pooled


def parity_record(outputs: dict[str, np.ndarray], refs: References, reference_label: str,
                  eager_label: str | None = None) -> dict:
    """The report's ``parity`` entry: against the upstream reference, depthport's eager model and, when
    there is one, the upstream reference in float64. With float64, ``fp64_error_ratio`` is the file's error
    against float64 divided by upstream float32's own error against float64 (1.0: as exact as upstream)."""
    record = ParityJson({"reference": reference_label, **compare(outputs, refs, "reference")})
    if len(outputs) < len(refs.names):
        record.parity_images = f"parity on {len(outputs)} of {len(refs.names)} images"
    if refs.eager is not None:
        names = refs.eager_names
        record.vs_eager = {"reference": eager_label or "depthport eager",
                           **compare({n: outputs[n] for n in names}, refs, "eager")}
        if len(names) < len(refs.names):
            record.eager_images = f"depthport eager on {len(names)} of {len(refs.names)} images"
    if refs.reference64 is not None:
        names = refs.fp64_names
        record.vs_reference_fp64 = {"reference": f"{reference_label}, computed in float64",
                                    **compare({n: outputs[n] for n in names}, refs, "reference64")}
        floor = upstream_fp64_error(refs)
        record.upstream_fp32_vs_fp64 = floor
        record.fp64_error_ratio = ParityJson(record.vs_reference_fp64).rel_l2_pooled / floor if floor > 0 else None
        if len(names) < len(refs.names):
            record.fp64_images = f"float64 reference on {len(names)} of {len(refs.names)} images"
    return record.data
