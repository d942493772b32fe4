"""LiteRT CompiledModel with an explicit accelerator and GPU precision.

Under the GPU's default precision policy an FP32 file may be computed in FP16, which can give wrong depth
(see ``depthport.fp16``); FP32 input/output types alone do not prevent it. So the GPU precision is always
explicit here and FP32 compute (``GpuOptions(enforce_f32=True)``) is the default; ``gpu_precision="fp16"``
lets the accelerator choose FP16. The GPU accelerator loads the Vulkan driver named by the environment
(``VK_ICD_FILENAMES``; ``depthport.runtimes.swiftshader.find_vulkan().env()`` gives SwiftShader's on a machine
without a GPU), which must be set before the first GPU model of the process is compiled.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from .litert import LiteRTRunner, litert_reason
from .litert_options import compiled_options


def use_swiftshader() -> str:
    """Point this process's Vulkan loader at SwiftShader (for a machine without a GPU); call it before the
    first GPU model is compiled. Returns the driver's description; raises InputError when there is none."""
    import ctypes

    from .swiftshader import VulkanUnavailable, find_vulkan

    try:
        setup = find_vulkan()
    except VulkanUnavailable as exc:
        raise InputError(str(exc)) from None
    if setup.icd:
        os.environ["VK_ICD_FILENAMES"] = setup.icd
    for folder in setup.library_dirs:
        # LD_LIBRARY_PATH is read at process start only; loading the loader by path makes the
        # accelerator's dlopen("libvulkan.so.1") find it.
        ctypes.CDLL(str(Path(folder) / "libvulkan.so.1"), mode=ctypes.RTLD_GLOBAL)
    return setup.describe()


def gpu_failure(reason: str) -> str:
    """Why the GPU accelerator did not start, and what to do: LiteRT's own words are often just a source location
    ("ERROR: [litert/runtime/compiled_model.cc:1036]"); its log (-v) has the cause, most often that no GPU driver
    (OpenCL, or Vulkan for WebGPU) was found, which SwiftShader stands in for."""
    from .swiftshader import ICD_NAME

    hint = "" if ICD_NAME in os.environ.get("VK_ICD_FILENAMES", "") else (
        "; on a machine without a GPU or its driver, --swiftshader runs the same GPU path in software")
    return f"its GPU accelerator did not start ({reason}; -v shows LiteRT's log{hint})"


class LiteRTGpuRunner(LiteRTRunner):
    """``LiteRTRunner`` on a chosen accelerator (CompiledModel API only); ``runtime`` names the choice,
    e.g. ``litert-gpu-fp32``."""

    def __init__(self, path: str | Path, threads: int = 2, accelerator: str = "gpu", gpu_precision: str = "fp32",
                 cpu_fallback: bool = False):
        self.accelerator, self.gpu_precision, self.cpu_fallback = accelerator, gpu_precision, cpu_fallback
        self._options = compiled_options(accelerator, gpu_precision, threads, cpu_fallback)
        super().__init__(path, threads=threads, api="compiled")
        self.runtime = f"litert-{accelerator}" + (f"-{gpu_precision}" if accelerator == "gpu" else "")

    def _compile(self):
        from ai_edge_litert.compiled_model import CompiledModel

        from ..quiet import native_stdout_to_stderr

        try:
            with native_stdout_to_stderr():
                model = CompiledModel.from_file(str(self.path), options=self._options)
        except (ValueError, RuntimeError) as exc:
            if self.accelerator != "gpu":
                raise
            raise RuntimeError(gpu_failure(litert_reason(exc))) from None
        if self.accelerator == "gpu" and not self.cpu_fallback and not model.is_fully_accelerated():
            raise RuntimeError("not every op runs on the GPU")
        return model
