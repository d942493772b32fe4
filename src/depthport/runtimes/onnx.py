"""ONNX through onnxruntime's CPU execution provider, intra-op threads = ``threads``. A dynamic-shape export
(``onnx-dynamic``) takes any H x W that are multiples of 14, and a prompted one any prompt h x w; its
``input_shape`` (and ``extra_shapes``) are the ones it was made at."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from .inputs import checked_inputs


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
        inp, *others = self._session.get_inputs()
        self._input_names = [i.name for i in (inp, *others)]
        self.dynamic = not all(isinstance(d, int) for d in inp.shape)
        self.input_shape = self._default_shape(inp.shape, "input") if self.dynamic else tuple(inp.shape)
        self.extra_shapes = tuple(self._default_shape(o.shape, "prompt")
                                  if not all(isinstance(d, int) for d in o.shape) else tuple(o.shape) for o in others)

    def _default_shape(self, dims, which: str) -> tuple[int, ...]:
        """A dynamic export's (1, 3, H, W) or prompt (1, 1, h, w) at the shape it was made at (its metadata); other
        shapes run too."""
        text = self._session.get_modelmeta().custom_metadata_map.get(f"depthport.default_{which}_hw", "")
        h, _, w = text.partition("x")
        if len(dims) != 4 or not (h.isdigit() and w.isdigit()):
            raise InputError(f"{self.path.name} has a dynamic {which} shape {dims} and no depthport default shape")
        return (*(d if isinstance(d, int) else 1 for d in dims[:2]), int(h), int(w))

    def run(self, x: np.ndarray, *extra: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        any_hw = self.dynamic and x.ndim == 4 and x.shape[:2] == (1, 3) and not (x.shape[2] % 14 or x.shape[3] % 14)
        shape = tuple(x.shape) if any_hw else self.input_shape
        extra_shapes = tuple(tuple(e.shape) if self.dynamic and getattr(e, "ndim", 0) == 4 and e.shape[:2] == s[:2]
                             else s for e, s in zip(extra, self.extra_shapes)) + self.extra_shapes[len(extra):]
        arrays = checked_inputs(self.path.name, (shape, *extra_shapes), (x, *extra))
        return np.asarray(self._session.run(None, dict(zip(self._input_names, arrays)))[0], dtype=np.float32)
