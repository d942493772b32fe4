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
    """The runner for an exported file, chosen by its extension.

    ``accelerator="gpu"`` runs a .tflite on the LiteRT GPU accelerator (every op on the GPU, or an error) with
    the explicit ``gpu_precision``: FP32 compute unless "fp16" is asked for (see ``runtimes.litert_gpu``).
    """
    import importlib

    from ..preprocess import InputError

    path = Path(path)
    if not path.is_file():
        raise InputError(f"model file not found: {path}")
    if path.suffix not in _BY_SUFFIX:
        raise InputError(f"unsupported model file {path.name}: expected one of {', '.join(_BY_SUFFIX)}")
    if accelerator != "cpu":
        if path.suffix != ".tflite":
            raise InputError(f"--accelerator {accelerator} runs .tflite files only, not {path.name}")
        from .litert_gpu import LiteRTGpuRunner

        options.pop("api", None)
        return LiteRTGpuRunner(path, accelerator=accelerator, gpu_precision=gpu_precision, **options)
    module, cls = _BY_SUFFIX[path.suffix]
    return getattr(importlib.import_module(module), cls)(path, **options)
