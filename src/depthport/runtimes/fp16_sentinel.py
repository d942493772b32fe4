"""A one-layer fp16 .pte whose output tells how the CPU running it accumulates FP16 products.

The file sums each row of a (1, 12, 4096) input with an fp16 Linear of ones (float32 in and out, FP16 inside,
as depthport's fp16 .pte files). Fed ones, XNNPACK's FP16-arithmetic kernels stall at 2048 (2048 + 1 rounds
back to 2048 in FP16), FP32 accumulation gives 4096. Twelve rows, because XNNPACK's one-row f16 kernels keep
several partial sums along the reduction while its multi-row ones (what a model's many tokens use) add one
product at a time. This reads what the runtime does, not what the CPU flags promise."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np

from ..scratch import process_folder

K = 4096
SHAPE = (1, 12, K)


def write_sentinel(path: Path) -> Path:
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    class RowSum(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(K, 8, bias=False).half()
            torch.nn.init.ones_(self.linear.weight)

        def forward(self, x):
            return self.linear(x.half()).float()

    program = torch.export.export(RowSum().eval(), (torch.ones(SHAPE),))
    path.write_bytes(to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)
    return path


def accumulates_in_fp16(total: float) -> bool:
    return total < 0.75 * K


def describe(total: float) -> str:
    how = "FP16 accumulation" if accumulates_in_fp16(total) else "FP32 accumulation"
    return f"ExecuTorch sums {K} ones in an fp16 Linear to {total:g} ({how})"


def sentinel_file() -> Path:
    """The sentinel .pte, lowered once per ExecuTorch version and kept in the evidence cache's folder (lowering it
    imports ExecuTorch's compiler, about 10 s); a kept file that does not load is lowered again."""
    from importlib.metadata import version

    from ..atomic import atomic_path
    from ..core.evidence_cache import default_folder

    path = default_folder() / "sentinel" / f"fp16-sentinel-k{K}-executorch-{version('executorch')}.pte"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            write_sentinel(Path(tmp))
    return path


def _run(path: Path) -> float:
    from executorch.extension.pybindings import portable_lib

    from .executorch import ExecuTorchRunner

    runner = ExecuTorchRunner(path, threads=portable_lib._threadpool_get_thread_count())
    return float(runner.run(np.ones(SHAPE, np.float32)).reshape(-1)[0])


@functools.cache
def host_total() -> float:
    """The sentinel's sum on this machine's ExecuTorch (run once per process, on the threadpool as it is)."""
    from ..quiet import native_stderr_muted

    with native_stderr_muted():
        try:
            path = sentinel_file()
        except OSError:  # no writable cache folder: lowered into a temporary one
            with tempfile.TemporaryDirectory(prefix="sentinel-", dir=process_folder()) as tmp:
                return _run(write_sentinel(Path(tmp) / "sentinel.pte"))
        try:
            return _run(path)
        except (RuntimeError, ValueError, OSError):  # a damaged kept file: lowered again
            path.unlink(missing_ok=True)
            return _run(sentinel_file())
