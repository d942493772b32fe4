"""ONNX through onnxruntime's CPU execution provider, intra-op threads = ``threads``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError


class OnnxRunner:
    runtime = "onnxruntime"

    @staticmethod
    def import_library() -> tuple:
        """onnxruntime, imported as loading a file imports it."""
        import onnxruntime

        return (onnxruntime,)

    def __init__(self, path: str | Path, threads: int = 2):
        import onnxruntime as ort

        self.path, self.threads = Path(path), threads
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types (Fail, InvalidGraph, ...)
            raise InputError(f"onnxruntime cannot load {self.path.name}: {str(exc).splitlines()[0]}") from None
        inp = self._session.get_inputs()[0]
        if not all(isinstance(d, int) for d in inp.shape):
            raise InputError(f"{self.path.name} has a dynamic input shape {inp.shape}; depthport exports are static")
        self._input_name = inp.name
        self.input_shape = tuple(inp.shape)

    def run(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        if tuple(x.shape) != self.input_shape:
            raise InputError(f"{self.path.name} takes input {list(self.input_shape)}, got {list(x.shape)}")
        return np.asarray(self._session.run(None, {self._input_name: x})[0], dtype=np.float32)
