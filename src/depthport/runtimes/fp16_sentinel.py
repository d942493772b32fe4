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


@functools.cache
def host_total() -> float:
    """The sentinel's sum on this machine's ExecuTorch (built and run once per process, on the threadpool as it is)."""
    from executorch.extension.pybindings import portable_lib

    from ..quiet import native_stderr_muted
    from .executorch import ExecuTorchRunner

    with tempfile.TemporaryDirectory(prefix="depthport-sentinel-") as tmp, native_stderr_muted():
        runner = ExecuTorchRunner(write_sentinel(Path(tmp) / "sentinel.pte"),
                                  threads=portable_lib._threadpool_get_thread_count())
        total = float(runner.run(np.ones(SHAPE, np.float32)).reshape(-1)[0])
        del runner
    return total
