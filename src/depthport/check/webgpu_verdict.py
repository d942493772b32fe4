"""What a browser run says about the GPU, as verdicts: did the WebGPU run stay on the GPU, did it compute what the
CPU computes, and in what precision did its shaders work (``verify.browser`` makes the runs and the figures).

A WebGPU run counts as on the GPU only when the runtime compiled the model for WebGPU (LiteRT.js:
``model.options.accelerator`` and ``isFullyAccelerated``; onnxruntime-web: a session created with its CPU fallback
disabled), no console line reports ops moved to the CPU or a fallback to WASM, and compute dispatches reached the
GPU queue during the run. LiteRT.js can recompile a model for WASM without an error; the log is where it says so.

The FP16 mode is read from the shaders themselves (``web/gpu_probe.js``): WGSL can compute in f16 only with
``enable f16;``, which needs the device feature ``shader-f16``; shaders that only ``pack2x16float`` /
``unpack2x16float`` keep tensors in FP16 and compute in FP32.
"""

from __future__ import annotations

import re

from ..core.report_model import BrowserRun, Fp16Predicted, OnGpu, RunInfo, WebFp16
from ..core.schema import ERROR, UNAVAILABLE, Verdict
from ..fp16.simulate import DEFAULT_TOL as FP16_TOL

WEBGPU_FP32_TOL = 2e-6  # rel. L2 of the WebGPU FP32 output against the same file on the CPU (WASM)
PREDICTION_MARGIN = 3.0  # the FP16 prediction agrees when the measured rel. L2 is within this factor of it
FALLBACK = re.compile(r"not fully compiled|falling back to wasm|partially delegating|will run on the cpu|"
                      r"not assigned to the preferred execution provider", re.IGNORECASE)
# WebGPU validation errors: the browser refused a shader, a pipeline or a command buffer, so that work never ran
# (the page gets no exception, only these console lines, and reads back whatever the output buffer held).
GPU_ERROR = re.compile(r"error while parsing wgsl|\[invalid (shadermodule|computepipeline|commandbuffer|bindgroup)|"
                       r"device (was )?lost", re.IGNORECASE)


def fallback_lines(console: list[str]) -> list[str]:
    """Console lines in which a runtime says that ops left the GPU."""
    return [line for line in console if FALLBACK.search(line)]


def gpu_error_lines(console: list[str]) -> list[str]:
    """Console lines in which WebGPU says it refused work."""
    return [line for line in console if GPU_ERROR.search(line)]


def first_error(lines: list[str]) -> str:
    """The most telling line of a WebGPU error: the WGSL parser's, when there is one."""
    for line in lines:
        for part in line.splitlines():
            if " error: " in part:
                return part.split(" error: ", 1)[1].strip()
    return lines[0].splitlines()[0].strip() if lines else ""


def gpu_evidence(info: RunInfo, gpu: dict | None, console: list[str]) -> OnGpu:
    """Whether a WebGPU run stayed on the GPU, with every fact that says so or not (the runtime's ``info``, and
    ``gpu`` and ``console`` as the page reported them)."""
    gpu = gpu or {}
    problems = []
    if info.accelerator != "webgpu":
        problems.append(f"the model was compiled for {info.accelerator!r}, not WebGPU (a fallback)")
    if info.fully_accelerated is False:
        problems.append("the runtime reports the model as not fully accelerated")
    fallback = fallback_lines(console)
    if fallback:
        problems.append(f"console: {fallback[0].strip()}")
    if not gpu.get("dispatches"):
        problems.append("no compute dispatch reached the GPU queue during the run")
    errors = gpu_error_lines(console)
    return OnGpu(on_gpu=not problems, problems=tuple(problems), accelerator=info.accelerator,
                 fully_accelerated=info.fully_accelerated, dispatches=gpu.get("dispatches"),
                 submits=gpu.get("submits"), shaders=len(gpu.get("shaders") or ()), fallback_log=tuple(fallback),
                 gpu_errors=len(errors), gpu_error=first_error(errors) or None)


def refused(evidence: OnGpu) -> str | None:
    """Why the GPU's output cannot be trusted although the run was on the GPU (WebGPU refused some of its work)."""
    if not evidence.gpu_errors:
        return None
    return (f"WebGPU reported {evidence.gpu_errors} validation error(s): it refused shaders, pipelines or command "
            f"buffers, so that work never ran (first: {evidence.gpu_error})")


def fp16_mode(gpu: dict | None) -> WebFp16:
    """What the shaders of an FP16 run did: "arithmetic" (f16 enabled and used), "storage" (f32 <-> f16 packing
    only), "fp32" (neither) or "unknown" (no shader seen), with the counts and the device features behind it."""
    gpu = gpu or {}
    shaders, devices = gpu.get("shaders") or [], gpu.get("devices") or []
    granted = sorted({f for d in devices for f in d.get("granted", [])})
    offered = sorted({f for d in devices for f in d.get("adapter_features", [])})
    uses_f16 = [s for s in shaders if s.get("enable_f16") or s.get("f16_values")]
    valid = sum(1 for s in uses_f16 if s.get("enable_f16") and "shader-f16" in granted)  # WGSL needs both
    storage = sum(1 for s in shaders if s.get("pack") or s.get("unpack"))
    mode = ("unknown" if not shaders else "arithmetic" if valid else "storage" if storage else "fp32")
    f16 = "granted" if "shader-f16" in granted else "offered, not requested" if "shader-f16" in offered else "not offered"
    evidence = (f"{len(shaders)} WGSL shader(s): {valid} compute in f16, {storage} pack/unpack f32<->f16 "
                f"(pack2x16float/unpack2x16float); the adapter's shader-f16 feature: {f16}")
    if len(uses_f16) > valid:
        evidence += (f"; {len(uses_f16) - valid} more declare f16 values without the f16 extension enabled on a "
                     f"device with it, which WebGPU refuses")
    return WebFp16(mode=mode, evidence=evidence, shaders=len(shaders), f16_shaders=valid,
                   invalid_f16_shaders=len(uses_f16) - valid, packing_shaders=storage, shader_f16=f16)


def webgpu_fp32_verdict(run: BrowserRun | None, why_not: str | None = None) -> Verdict:
    """Pass: the run stayed on the GPU and its output is within ``WEBGPU_FP32_TOL`` (rel. L2) of the CPU's."""
    limits = {"rel_l2_vs_cpu": WEBGPU_FP32_TOL}
    if run is None:
        return Verdict.not_measured(why_not or "the WebGPU FP32 run was not made", ERROR, limits)
    if run.error:
        return Verdict.failed(f"WebGPU FP32 did not run: {run.error}", {}, limits)
    evidence, vs_cpu = run.on_gpu, run.vs_cpu
    figures = {"rel_l2_vs_cpu": vs_cpu.rel_l2_pooled, "pearson_vs_cpu": vs_cpu.pearson_worst,
               "shape": list(run.shape), "dispatches": evidence.dispatches}
    if not evidence.on_gpu:
        return Verdict.failed("not on the GPU: " + "; ".join(evidence.problems), figures, limits)
    if refused(evidence):
        return Verdict.failed(refused(evidence), figures, limits)
    if not vs_cpu.rel_l2_pooled <= WEBGPU_FP32_TOL:
        return Verdict.failed(f"computes wrongly on WebGPU: rel L2 vs CPU {vs_cpu.rel_l2_pooled:.3g} > "
                              f"{WEBGPU_FP32_TOL:g}", figures, limits)
    return Verdict.passed(figures, limits, f"on the GPU ({evidence.dispatches} dispatches), rel L2 vs CPU "
                                           f"{vs_cpu.rel_l2_pooled:.2e} at {run.shape[0]}x{run.shape[1]}")


def prediction_note(measured: float, mode: str, predicted: Fp16Predicted) -> tuple[str, bool | None]:
    """How the measured FP16 error compares with the prediction for what the browser did; (text, agrees)."""
    value = getattr(predicted, mode) if mode in ("storage", "arithmetic") else None
    if value is None:
        return "no prediction for this mode", None
    ratio = measured / value if value > 0 else float("inf")
    agrees = 1 / PREDICTION_MARGIN <= ratio <= PREDICTION_MARGIN
    return (f"measured {measured:.3g} vs predicted {value:.3g} for FP16 {mode} ({ratio:.2f}x; "
            f"{'within' if agrees else 'OUTSIDE'} the {PREDICTION_MARGIN:g}x margin)"), agrees


def webgpu_fp16_verdict(run: BrowserRun | None, why_not: str | None = None, cause: str = UNAVAILABLE) -> Verdict:
    """Pass: on the GPU and within the FP16 tolerance of the CPU (rel. L2); the figures hold what the shaders did
    and the prediction beside the measurement. Not required: FP32 is what the page asks for by default."""
    limits = {"rel_l2_vs_cpu": FP16_TOL}
    if run is None:
        return Verdict.not_measured(why_not or "the WebGPU FP16 run was not made", cause, limits)
    if run.error:
        return Verdict.failed(f"WebGPU FP16 did not run: {run.error}", {}, limits)
    evidence, vs_cpu, fp16 = run.on_gpu, run.vs_cpu, run.fp16
    figures = {"rel_l2_vs_cpu": vs_cpu.rel_l2_pooled, "mode": fp16.mode, "predicted_storage": fp16.predicted.storage,
               "predicted_arithmetic": fp16.predicted.arithmetic, "agrees": fp16.agrees}
    if not evidence.on_gpu:
        return Verdict.failed("not on the GPU: " + "; ".join(evidence.problems), figures, limits)
    if refused(evidence):
        return Verdict.failed(f"{refused(evidence)}; rel L2 vs CPU {vs_cpu.rel_l2_pooled:.3g}", figures, limits)
    if not vs_cpu.rel_l2_pooled <= FP16_TOL:
        return Verdict.failed(f"FP16 on WebGPU is off: rel L2 vs CPU {vs_cpu.rel_l2_pooled:.3g} > {FP16_TOL:g} "
                              f"(FP16 {fp16.mode}); {fp16.note}", figures, limits)
    return Verdict.passed(figures, limits, f"FP16 {fp16.mode} on the GPU, rel L2 vs CPU "
                                           f"{vs_cpu.rel_l2_pooled:.2e}; {fp16.note}")
