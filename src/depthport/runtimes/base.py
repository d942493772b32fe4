from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np


class Runner(Protocol):
    runtime: str
    input_shape: tuple[int, ...]

    def run(self, x: np.ndarray) -> np.ndarray: ...


_BY_SUFFIX = {
    ".tflite": ("depthport.runtimes.litert", "LiteRTRunner"),
    ".pte": ("depthport.runtimes.executorch", "ExecuTorchRunner"),
    ".onnx": ("depthport.runtimes.onnx", "OnnxRunner"),
}


def load_runner(path: str | Path, accelerator: str = "cpu", gpu_precision: str = "fp32", **options) -> Runner:
    """The runner for an exported file, chosen by its extension, after ``validate.validate_model_file`` has
    checked the file (an InputError, never a native crash, for an empty, truncated or foreign file).

    ``accelerator="gpu"`` runs a .tflite on the LiteRT GPU accelerator (every op on the GPU, or an error) with
    the explicit ``gpu_precision``: FP32 compute unless "fp16" is asked for (see ``runtimes.litert_gpu``).
    """
    import importlib

    from ..preprocess import InputError

    path = Path(path)
    if path.is_dir():
        raise InputError(f"model path {path} is a folder, not a model file")
    if not path.is_file():
        raise InputError(f"model file not found: {path}")
    if path.suffix not in _BY_SUFFIX:
        raise InputError(f"unsupported model file {path.name}: expected one of {', '.join(_BY_SUFFIX)}")
    if accelerator != "cpu" and path.suffix != ".tflite":
        raise InputError(f"--accelerator {accelerator} runs .tflite files only, not {path.name}")
    from .validate import validate_model_file

    validate_model_file(path)  # a native runtime may crash on a bad file: check it in Python first
    if accelerator != "cpu":
        from .litert_gpu import LiteRTGpuRunner

        options.pop("api", None)
        return LiteRTGpuRunner(path, accelerator=accelerator, gpu_precision=gpu_precision, **options)
    module, cls = _BY_SUFFIX[path.suffix]
    return getattr(importlib.import_module(module), cls)(path, **options)
