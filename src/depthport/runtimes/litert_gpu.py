"""LiteRT CompiledModel with an explicit accelerator and GPU precision.

Under the GPU's default precision policy an FP32 file may be computed in FP16, which can give wrong depth
(see ``depthport.fp16``); FP32 input/output types alone do not prevent it. So the GPU precision is always
explicit here and FP32 compute (``GpuOptions(enforce_f32=True)``) is the default; ``gpu_precision="fp16"``
lets the accelerator choose FP16. The GPU accelerator loads the Vulkan driver named by the environment
(``VK_ICD_FILENAMES``; ``depthport.check.swiftshader.find_vulkan().env()`` gives SwiftShader's on a machine
without a GPU), which must be set before the first GPU model of the process is compiled.
"""

from __future__ import annotations

from pathlib import Path

from ..preprocess import InputError
from .litert import LiteRTRunner

ACCELERATORS = ("cpu", "gpu")
GPU_PRECISIONS = ("fp32", "fp16")


def compiled_options(accelerator: str = "cpu", gpu_precision: str = "fp32", threads: int = 2,
                     cpu_fallback: bool = False):
    """ai_edge_litert Options for one accelerator. GPU: FP32 compute unless ``gpu_precision="fp16"``; with
    ``cpu_fallback`` the ops the GPU rejects run on the CPU instead of failing the compile."""
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


def use_swiftshader() -> str:
    """Point this process's Vulkan loader at SwiftShader (for a machine without a GPU); call it before the
    first GPU model is compiled. Returns the driver's description; raises InputError when there is none."""
    import ctypes
    import os

    from ..check.swiftshader import VulkanUnavailable, find_vulkan

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


def add_accelerator_args(parser) -> None:
    """The --accelerator / --gpu-precision / --swiftshader options shared by predict and bench."""
    parser.add_argument("--accelerator", choices=ACCELERATORS, default="cpu",
                        help="run .tflite files on the CPU or, every op, on the LiteRT GPU accelerator")
    parser.add_argument("--gpu-precision", choices=GPU_PRECISIONS, default="fp32",
                        help="GPU compute precision (default fp32: GpuOptions(enforce_f32=True)); fp16 lets the "
                             "GPU compute in half precision, which can give wrong depth")
    parser.add_argument("--swiftshader", action="store_true",
                        help="with --accelerator gpu: use depthport's SwiftShader Vulkan driver (no GPU here)")


def accelerator_options(args) -> dict:
    """load_runner options from the parsed --accelerator/--gpu-precision/--swiftshader."""
    if args.swiftshader:
        if args.accelerator != "gpu":
            raise InputError("--swiftshader goes with --accelerator gpu")
        use_swiftshader()
    return {"accelerator": args.accelerator, "gpu_precision": args.gpu_precision}


class LiteRTGpuRunner(LiteRTRunner):
    """``LiteRTRunner`` on a chosen accelerator (CompiledModel API only); ``runtime`` names the choice,
    e.g. ``litert-gpu-fp32``."""

    def __init__(self, path: str | Path, threads: int = 2, accelerator: str = "gpu", gpu_precision: str = "fp32",
                 cpu_fallback: bool = False):
        self.accelerator, self.gpu_precision, self.cpu_fallback = accelerator, gpu_precision, cpu_fallback
        self._options = compiled_options(accelerator, gpu_precision, threads, cpu_fallback)
        super().__init__(path, threads=threads, api="compiled")
        self.runtime = f"litert-{accelerator}" + (f"-{gpu_precision}" if accelerator == "gpu" else "")

    def _init_compiled(self) -> None:
        from ai_edge_litert.compiled_model import CompiledModel

        self._model = CompiledModel.from_file(str(self.path), options=self._options)
        if self.accelerator == "gpu" and not self.cpu_fallback and not self._model.is_fully_accelerated():
            raise RuntimeError("not every op runs on the GPU")
        self._inputs = self._model.create_input_buffers(0)
        self._outputs = self._model.create_output_buffers(0)
        key = self._model.get_signature_by_index(0)["key"]
        (inp,) = self._model.get_input_tensor_details(key).values()
        (out,) = self._model.get_output_tensor_details(key).values()
        self.input_shape = tuple(int(d) for d in inp["shape"])
        self._output_shape = tuple(int(d) for d in out["shape"])
