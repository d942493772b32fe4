"""The ai_edge_litert CompiledModel options, built here for every LiteRT caller (runners, GPU check, probe).

On the GPU the precision is always explicit: FP32 compute (``GpuOptions(enforce_f32=True)``) unless
``gpu_precision="fp16"``, because under the GPU's default policy an FP32 file may be computed in FP16 and give
wrong depth (see ``depthport.fp16``).
"""

from __future__ import annotations

from ..errors import InputError

ACCELERATORS = ("cpu", "gpu")
GPU_PRECISIONS = ("fp32", "fp16")


def compiled_options(accelerator: str = "cpu", gpu_precision: str = "fp32", threads: int = 2,
                     cpu_fallback: bool = False):
    """ai_edge_litert Options for one accelerator, ``threads`` CPU threads. GPU: FP32 compute unless
    ``gpu_precision="fp16"``; with ``cpu_fallback`` the ops the GPU rejects run on the CPU instead of failing
    the compile."""
    from ai_edge_litert.cpu_options import CpuOptions
    from ai_edge_litert.gpu_options import GpuOptions
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import Options

    if accelerator not in ACCELERATORS:
        raise InputError(f"accelerator must be one of {', '.join(ACCELERATORS)}, not {accelerator!r}")
    if gpu_precision not in GPU_PRECISIONS:
        raise InputError(f"GPU precision must be one of {', '.join(GPU_PRECISIONS)}, not {gpu_precision!r}")
    cpu = CpuOptions(num_threads=threads)
    if accelerator == "cpu":
        return Options(HardwareAccelerator.CPU, cpu_options=cpu)
    hardware = HardwareAccelerator.GPU | HardwareAccelerator.CPU if cpu_fallback else HardwareAccelerator.GPU
    return Options(hardware, cpu_options=cpu, gpu_options=GpuOptions(enforce_f32=gpu_precision == "fp32"))
