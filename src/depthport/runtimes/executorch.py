"""ExecuTorch (.pte) through its C++ runtime (executorch.runtime), XNNPACK threadpool sized to ``threads``."""

from __future__ import annotations

import weakref
from pathlib import Path

import numpy as np

from ..errors import InputError
from .inputs import checked_inputs

# Runners whose methods are loaded. XNNPACK binds the process-wide threadpool when a method is loaded, so the pool
# may only be resized while none is alive: resizing under a loaded method frees the pool it still uses (seen here
# as random hangs and segfaults in execute).
_LIVE: weakref.WeakSet = weakref.WeakSet()


def size_threadpool(threads: int) -> None:
    """Give the process-wide ExecuTorch threadpool ``threads`` threads, if no loaded method depends on it."""
    from executorch.extension.pybindings import portable_lib

    current = portable_lib._threadpool_get_thread_count()
    if current == threads:
        return
    if len(_LIVE):
        raise RuntimeError(f"ExecuTorch's threadpool is process-wide and already serves a loaded .pte with {current} "
                           f"threads; load every .pte of a process with the same thread count (asked {threads})")
    portable_lib._unsafe_reset_threadpool(threads)


class ExecuTorchRunner:
    runtime = "executorch"

    @staticmethod
    def import_library() -> tuple:
        """ExecuTorch's Python runtime module, imported as loading a file imports it."""
        from executorch import runtime

        return (runtime,)

    def __init__(self, path: str | Path, threads: int = 2):
        from ..quiet import native_stderr_muted

        self.path, self.threads = Path(path), threads
        with native_stderr_muted():  # cpuinfo and loader log lines on first use
            from executorch.runtime import Runtime

            size_threadpool(threads)
            runtime = Runtime.get()
            try:
                self._program = runtime.load_program(self.path)
                self._method = self._program.load_method("forward")
            except (RuntimeError, ValueError) as exc:
                backends = ", ".join(runtime.backend_registry.registered_backend_names)
                raise InputError(f"ExecuTorch cannot load {self.path.name}: {str(exc).splitlines()[0]} (delegates "
                                 f"available here: {backends})") from None
        _LIVE.add(self)
        meta = self._method.metadata
        shapes = [tuple(int(d) for d in meta.input_tensor_meta(i).sizes()) for i in range(meta.num_inputs())]
        self.input_shape, self.extra_shapes = shapes[0], tuple(shapes[1:])
        self.output_shape = tuple(int(d) for d in meta.output_tensor_meta(0).sizes())

    def run(self, x: np.ndarray, *extra: np.ndarray) -> np.ndarray:
        import torch

        arrays = checked_inputs(self.path.name, (self.input_shape, *self.extra_shapes), (x, *extra))
        out = self._method.execute([torch.from_numpy(a) for a in arrays])[0]
        return np.array(out.detach().numpy(), dtype=np.float32)
