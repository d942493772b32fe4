"""LiteRT on the CPU through the CompiledModel API (or the classic Interpreter), with an explicit thread count."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import InputError
from .inputs import checked_inputs
from .litert_options import compiled_options


def litert_reason(exc: BaseException) -> str:
    """The telling line of a LiteRT error, whose text nests "ERROR: [file:line]" / "└ ..." lines, cause last."""
    raw = [line.strip("└ \t") for line in str(exc).splitlines() if line.strip("└ \t")]
    text = [line for line in (re.sub(r"^ERROR: \[[^\]]*\]", "", r).strip() for r in raw) if line]
    return text[-1] if text else raw[-1] if raw else type(exc).__name__  # else the innermost source location


class LiteRTRunner:
    runtime = "litert"

    @staticmethod
    def import_library() -> tuple:
        """LiteRT's Python modules, imported as loading a file imports them."""
        from ai_edge_litert import compiled_model, interpreter

        return compiled_model, interpreter

    def __init__(self, path: str | Path, threads: int = 2, api: str = "compiled"):
        self.path, self.threads, self.api = Path(path), threads, api
        error = None
        try:
            if api == "compiled":
                self._init_compiled()
            else:
                self._init_interpreter()
        except (ValueError, RuntimeError) as exc:
            error = f"LiteRT cannot load {self.path.name}: {litert_reason(exc)}"
        if error:
            # Raised outside the except block, so that the failed load's frames (and LiteRT's environment, which
            # logs "DestroyAccelerator" lines when freed) go now, while the caller still mutes native stderr.
            for name in ("_model", "_inputs", "_outputs", "_interp", "_runner"):
                self.__dict__.pop(name, None)
            raise InputError(error)
        self.runtime = f"litert-{api}"

    def _init_interpreter(self) -> None:
        from ai_edge_litert.interpreter import Interpreter

        self._interp = Interpreter(model_path=str(self.path), num_threads=self.threads)
        self._runner = self._interp.get_signature_runner()
        detail = self._runner.get_input_details()
        self._input_names = list(detail)
        shapes = [tuple(int(d) for d in detail[name]["shape"]) for name in self._input_names]
        self.input_shape, self.extra_shapes = shapes[0], tuple(shapes[1:])

    def _compile(self):
        """The file's CompiledModel on the CPU with ``threads`` threads."""
        from ai_edge_litert.compiled_model import CompiledModel

        return CompiledModel.from_file(str(self.path), options=compiled_options("cpu", threads=self.threads))

    def _init_compiled(self) -> None:
        self._model = self._compile()
        self._inputs = self._model.create_input_buffers(0)
        self._outputs = self._model.create_output_buffers(0)
        key = self._model.get_signature_by_index(0)["key"]
        shapes = [tuple(int(d) for d in t["shape"]) for t in self._model.get_input_tensor_details(key).values()]
        out = next(iter(self._model.get_output_tensor_details(key).values()))
        self.input_shape, self.extra_shapes = shapes[0], tuple(shapes[1:])
        self._output_shape = tuple(int(d) for d in out["shape"])

    def run(self, x: np.ndarray, *extra: np.ndarray) -> np.ndarray:
        arrays = checked_inputs(self.path.name, (self.input_shape, *self.extra_shapes), (x, *extra))
        if self.api != "compiled":
            return np.asarray(self._runner(**dict(zip(self._input_names, arrays)))["output_0"])
        for buffer, array in zip(self._inputs, arrays):
            buffer.write(array)
        self._model.run_by_index(0, self._inputs, self._outputs)
        n = int(np.prod(self._output_shape))
        return np.asarray(self._outputs[0].read(n, np.float32)).reshape(self._output_shape)
