from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from ..errors import InputError
from .validate import folder_given, validate_model_file


class Runner(Protocol):
    """``input_shape`` is the image's; ``extra_shapes`` those of the file's further inputs, in order (Prompt Depth
    Anything's prompt depth), which ``run`` takes after the image."""

    runtime: str
    input_shape: tuple[int, ...]
    extra_shapes: tuple[tuple[int, ...], ...]

    def run(self, x: np.ndarray, *extra: np.ndarray) -> np.ndarray: ...



def _litert():
    from .litert import LiteRTRunner

    return LiteRTRunner


def _executorch():
    from .executorch import ExecuTorchRunner

    return ExecuTorchRunner


def _onnx():
    from .onnx import OnnxRunner

    return OnnxRunner


# Each runtime's runner class by file suffix, imported only when a file of its kind is loaded.
_CLASS_OF = {".tflite": _litert, ".pte": _executorch, ".onnx": _onnx}
SUFFIXES = tuple(_CLASS_OF)


def runner_class(suffix: str):
    """The runner class for files ending in ``suffix`` (its module imported now), or None for another suffix."""
    load = _CLASS_OF.get(suffix)
    return load() if load else None


def load_runner(path: str | Path, accelerator: str = "cpu", gpu_precision: str = "fp32", **options) -> Runner:
    """The runner for an exported file, chosen by its extension, after ``validate.validate_model_file`` has
    checked the file (an InputError, never a native crash, for an empty, truncated or foreign file).

    ``accelerator="gpu"`` runs a .tflite on the LiteRT GPU accelerator (every op on the GPU, or an error) with
    the explicit ``gpu_precision``: FP32 compute unless "fp16" is asked for (see ``runtimes.litert_gpu``).
    """
    path = Path(path)
    if path.is_dir():
        raise folder_given(path)
    if not path.is_file():
        raise InputError(f"model file not found: {path}")
    if path.suffix not in SUFFIXES:
        raise InputError(f"unsupported model file {path.name}: expected one of {', '.join(SUFFIXES)}")
    if accelerator != "cpu" and path.suffix != ".tflite":
        raise InputError(f"--accelerator {accelerator} runs .tflite files only, not {path.name}")
    validate_model_file(path)  # a native runtime may crash on a bad file: check it in Python first
    if accelerator != "cpu":
        from .litert_gpu import LiteRTGpuRunner

        options.pop("api", None)
        return LiteRTGpuRunner(path, accelerator=accelerator, gpu_precision=gpu_precision, **options)
    return runner_class(path.suffix)(path, **options)
