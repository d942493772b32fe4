"""report.json's GPU sections, typed (part of ``core.report_model``, which re-exports every class here): a .tflite's
GPU check (the static rules' violations, the real accelerator's run) and a web folder's runs in a browser.

Each class's fields are in the order the JSON holds them; ``OMIT_NONE`` names the fields a writer leaves out when
it has nothing for them (``report_model.dump``).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Violation:
    """One static GPU rule broken by one op (``check.static.check_static``)."""

    op_index: int
    op: str
    rule: str
    severity: str
    source: str
    detail: str
    shapes: str


@dataclass(frozen=True)
class GpuCheck:
    """A .tflite's static GPU check: every rule broken, in op order (its verdict is the checks' ``gpu_static``)."""

    violations: tuple[Violation, ...] = ()


@dataclass(frozen=True)
class RejectedOp:
    """An op the GPU accelerator refused, with the reason from LiteRT's log."""

    op: str
    reason: str = ""


@dataclass(frozen=True)
class GpuRuntime:
    """The real GPU accelerator's run of a .tflite (``check.gpu_runtime.run_gpu_check``): whether every op was
    delegated (None: no verdict), the ops it refused, and the numerical run against the CPU; then the run's
    setting (adapter, precision, Vulkan), written only where the run got that far (``OMIT_NONE``)."""

    OMIT_NONE: typing.ClassVar[tuple[str, ...]] = ("adapter", "compile_s", "precision", "tolerance", "vulkan", "wall_s")

    fully_delegated: bool | None = None
    rejected_ops: tuple[RejectedOp, ...] = ()
    rel_l2_vs_cpu: float | None = None
    pearson_vs_cpu: float | None = None
    shape: tuple[int, ...] | None = None
    numeric_file: str | None = None
    numeric_ok: bool | None = None
    note: str = ""
    adapter: str | None = None
    compile_s: float | None = None
    precision: str | None = None
    tolerance: float | None = None
    vulkan: str | None = None
    wall_s: float | None = None


@dataclass(frozen=True)
class RunInfo:
    """The runtime's account of a browser run, as the page reported it: which runtime, the backend asked for and the
    one the model was compiled for, whether it is fully accelerated (LiteRT.js only), precision and threads."""

    OMIT_NONE: typing.ClassVar[tuple[str, ...]] = ("fully_accelerated",)

    runtime: str | None = None
    requested: str | None = None
    accelerator: str | None = None
    fully_accelerated: bool | None = None
    precision: str | None = None
    threads: bool | int | None = None


@dataclass(frozen=True)
class RunTime:
    """A browser run's time per inference: the first call (WebGPU: shader compilation), the median of the others,
    how many calls, and what ran them."""

    first_ms: float | None = None
    median_ms: float | None = None
    calls: int | None = None
    label: str = "-"


@dataclass(frozen=True)
class Comparison:
    """A browser run's output against another's on the same images (``core.metrics.summarize``): the worst and
    median image's figures and the pooled rel. L2."""

    images: int | None = None
    pearson_worst: float | None = None
    pearson_median: float | None = None
    rel_l2_pooled: float | None = None
    max_abs: float | None = None
    mean_abs_worst: float | None = None
    mean_abs_median: float | None = None
    delta125_worst: float | None = None
    delta125_median: float | None = None


@dataclass(frozen=True)
class OnGpu:
    """Whether a WebGPU run stayed on the GPU (``check.webgpu_verdict.gpu_evidence``): the verdict, what spoke against
    it, and the facts behind it (the runtime's compilation, the GPU queue's counters, the console's fallback and
    WebGPU error lines)."""

    on_gpu: bool = False
    problems: tuple[str, ...] = ()
    accelerator: str | None = None
    fully_accelerated: bool | None = None
    dispatches: int | None = None
    submits: int | None = None
    shaders: int = 0
    fallback_log: tuple[str, ...] = ()
    gpu_errors: int = 0
    gpu_error: str | None = None


@dataclass(frozen=True)
class Fp16Predicted:
    storage: float | None = None
    arithmetic: float | None = None


@dataclass(frozen=True)
class WebFp16:
    """What the shaders of a WebGPU FP16 run did (``check.webgpu_verdict.fp16_mode``): the mode, the shader counts
    and the device's shader-f16 feature behind it; then the prediction beside the measurement."""

    mode: str = "unknown"
    evidence: str = ""
    shaders: int = 0
    f16_shaders: int = 0
    invalid_f16_shaders: int = 0
    packing_shaders: int = 0
    shader_f16: str = ""
    predicted: Fp16Predicted = Fp16Predicted()
    note: str = ""
    agrees: bool | None = None


@dataclass(frozen=True)
class GpuCounters:
    """What reached the GPU queue during a WebGPU run (``web/gpu_probe.js``), and the features its device got."""

    submits: int | None = None
    dispatches: int | None = None
    pipelines: int | None = None
    device_features: tuple[str, ...] | None = None


@dataclass(frozen=True)
class BrowserRun:
    """One backend's run of a web folder's page (``verify.web_folder.public_run``): where and how it ran, or why it
    did not; for a WebGPU run whether it stayed on the GPU and its output against the CPU's and the reference's (and
    for FP16 what its shaders did); then the console lines that say ops left the GPU or WebGPU refused work."""

    OMIT_NONE: typing.ClassVar[tuple[str, ...]] = ("error", "info", "time", "file", "on_gpu", "vs_cpu",
                                                   "vs_reference", "fp16", "gpu")

    name: str = ""
    shape: tuple[int, ...] = ()
    error: str | None = None
    info: RunInfo | None = None
    time: RunTime | None = None
    file: str | None = None
    on_gpu: OnGpu | None = None
    vs_cpu: Comparison | None = None
    vs_reference: Comparison | None = None
    fp16: WebFp16 | None = None
    gpu: GpuCounters | None = None
    console_fallback: tuple[str, ...] = ()
    console_gpu_errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class PreprocessCheck:
    """The page's input tensors against depthport's preprocessing of the same pixels."""

    max_abs_diff: float | None = None
    images: int | None = None
    exact: bool | None = None
    method: str | None = None


@dataclass(frozen=True)
class SmallReexport:
    shape: tuple[int, ...] = ()
    why: str = ""


@dataclass(frozen=True)
class Shown:
    """The page as a person uses it: the bundled image on ``backend``, its time, or why the page failed."""

    OMIT_NONE: typing.ClassVar[tuple[str, ...]] = ("ms", "error")

    backend: str = ""
    ms: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class Browser:
    """A web folder's page in headless Chromium (``verify.web_folder.assemble``): the browser and its flags, the
    runtime, each backend's run, the small re-export the WebGPU runs used (None: the file itself), the page as shown,
    the preprocessing check (left out when the WASM run failed) and the screenshot's file (once written)."""

    OMIT_NONE: typing.ClassVar[tuple[str, ...]] = ("preprocess", "screenshot")

    browser: str = "Chromium"
    flags: tuple[str, ...] = ()
    driver: str | None = None
    fast_shaders: bool | None = None
    adapter: str | None = None
    runtime: str = ""
    runtime_version: str = ""
    backends: dict[str, BrowserRun] = field(default_factory=dict)
    small_reexport: SmallReexport | None = None
    shown: Shown = Shown()
    preprocess: PreprocessCheck | None = None
    screenshot: str | None = None


@dataclass(frozen=True)
class WebFiles:
    runtime: str | None = None
    model_file: str = "-"
