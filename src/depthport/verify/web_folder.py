"""verify: a web folder in headless Chromium. The page's own JS decodes every verification image (sent as PNG),
preprocesses it and runs the model; the outputs come back and are measured like any other file's.

On one page of one browser (``web.chromium.shared_browser``):
- WASM (the CPU) at the export shape on every image: the file's ``parity`` (the FP32 gate, float64 included), and
  the page's input tensors against depthport's own preprocessing;
- WebGPU FP32 and, for LiteRT.js, FP16, at the export shape, or on a small re-export of the same model and rewrites
  when the export is large (SwiftShader emulates the GPU on the CPU), each against the same file on WASM and against
  the reference at that shape; beside FP16, depthport's FP16 predictions (storage and arithmetic) and what the shaders
  did (``check.webgpu_verdict``). onnxruntime-web runs an FP32 model in FP32 only: no FP16 run there;
- the page as a person uses it (the bundled image), screenshotted.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..check import webgpu_verdict
from ..core import metrics
from ..core.report_model import (Browser, BrowserRun, Comparison, Fp16Predicted, GpuCounters, OnGpu, PreprocessCheck,
                                 RunInfo, RunTime, Shown, SmallReexport, WebFp16, dump, load)
from ..core.schema import ERROR, ArtifactJson, BrowserJson, Fp16PredictionJson, ReportJson, Verdict, failed_section
from ..errors import InputError, error_text
from ..export.small import SmallExport, small_export
from ..web import chromium
from ..web.folder import read_config
from ..web.server import serving
from .parity import References, parity_record

SMALL_URL = "/_depthport/small-model"  # where the page finds the small re-export
BACKENDS = {"wasm": ("wasm", "fp32"), "webgpu-fp32": ("webgpu", "fp32"), "webgpu-fp16": ("webgpu", "fp16")}
SWIFTSHADER_NOTE = "SwiftShader: the GPU emulated on the CPU; not a GPU timing"
TIMED_CALLS = 2  # warm calls at least, besides the first, for the time per inference


@dataclass
class WebJob:
    """One web folder to verify and what it is measured against."""

    folder: Path
    refs: References  # at the export shape
    built: object  # depthport.build.Built of the export: the small re-export and the FP16 predictions
    scratch: Path
    threads: int = 2
    fast_shaders: bool = False
    backends: tuple[str, ...] = tuple(BACKENDS)
    config: dict = field(default_factory=dict)
    small: dict = field(default_factory=dict)  # the export's small re-export memo (ExportContext.small), if any

    def __post_init__(self):
        self.config = self.config or read_config(self.folder)


def png(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def compare(outputs: dict, baseline: dict) -> Comparison:
    """Pooled figures of ``outputs`` against ``baseline`` (same image names), without the per-image part."""
    return Comparison(**metrics.summarize([metrics.image_metrics(outputs[k], baseline[k]) for k in outputs]))


def timing(ms: list[float], accelerator: str | None, adapter: str) -> RunTime:
    """First call (WebGPU: shader compilation) and the median of the others, labelled with what ran them."""
    rest = ms[1:]
    label = SWIFTSHADER_NOTE if accelerator == "webgpu" and "swiftshader" in adapter else (
        "WebGPU adapter " + adapter if accelerator == "webgpu" else "WASM on the CPU")
    return RunTime(first_ms=ms[0], median_ms=float(np.median(rest)) if rest else None, calls=len(ms), label=label)


@dataclass
class PageRun:
    """One backend's run through the page (``run_backend``), as the page gave it: the runtime's account, the GPU
    probe's record (``web/gpu_probe.js``; WebGPU only), the console lines, the page's input tensors and the outputs by
    image, and the timing; or why it failed. ``public_run`` makes report.json's ``BrowserRun`` of it."""

    name: str
    shape: tuple[int, int]
    error: str | None = None
    info: RunInfo | None = None
    gpu: dict | None = None
    console: list[str] = field(default_factory=list)
    tensors: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)
    time: RunTime | None = None


def run_backend(page, name: str, model: str | None, hw: tuple[int, int], images, adapter: str,
                prompts: dict | None = None) -> PageRun:
    """One backend over ``images`` (with their ``prompts``, for a prompted model) through the page: its outputs,
    inputs, timings and the runtime's account."""
    backend, precision = BACKENDS[name]
    mark = len(page.console)
    try:
        info = load(RunInfo, page.select(backend, precision, model))
        shape = [1, 3, *hw]
        tensors, outputs, ms = {}, {}, []
        for img_name, img in images:
            tensor, depth, took = page.infer_png(backend, precision, model, png(img), shape,
                                                 prompts[img_name] if prompts else None)
            tensors[img_name], outputs[img_name] = tensor, depth.reshape(hw)
            ms.append(took)
        if len(ms) < TIMED_CALLS + 1:  # the first call compiles (WebGPU: its shaders): time warm calls too
            ms += page.time(backend, precision, model, TIMED_CALLS + 1 - len(ms))
    except RuntimeError as exc:
        return PageRun(name, hw, error=error_text(exc), console=page.console[mark:])
    gpu = page.gpu() if backend == "webgpu" else None
    return PageRun(name, hw, info=info, gpu=gpu, console=page.console[mark:], tensors=tensors, outputs=outputs,
                   time=timing(ms, info.accelerator, adapter))


def fp16_predictions(model, hw: tuple[int, int], normalize: bool, images, prompts: dict | None = None) -> Fp16Predicted:
    """depthport's FP16 predictions for ``model``: FP16 storage (fp16 weights and op outputs, FP32 arithmetic:
    ``accumulate="fp32"``) and FP16 arithmetic (fp16 accumulation too), as rel. L2 against FP32."""
    from ..check.fp16_compute import predict_fp16

    rel_l2 = {}
    for accumulate in ("fp32", "fp16"):
        entry = predict_fp16(model, hw, normalize=normalize, accumulate=accumulate, images=images, prompts=prompts)
        rel_l2[accumulate] = Fp16PredictionJson(entry).rel_l2
    return Fp16Predicted(storage=rel_l2["fp32"], arithmetic=rel_l2["fp16"])


def gpu_runs(page, job: WebJob, adapter: str, cpu: PageRun, small: SmallExport | None) -> dict[str, BrowserRun]:
    """The WebGPU runs with their comparisons: against the same file on the CPU and the reference at that shape."""
    model_url, hw, model = (SMALL_URL, small.hw, small.model) if small else (None, job.built.input_hw, job.built.model)
    refs = job.refs.at(hw, job.threads, model, fp64=False) if small else job.refs
    names = [n for n in job.backends if n.startswith("webgpu")]
    if small and names:
        cpu = run_backend(page, "wasm", model_url, hw, refs.images, adapter, refs.prompts)
    runs = {}
    for name in names:
        if name == "webgpu-fp16" and job.config["runtime"] == "onnxruntime-web":
            continue
        run = run_backend(page, name, model_url, hw, refs.images, adapter, refs.prompts)
        file = f"small re-export {hw[0]}x{hw[1]}" if small else job.config["model_file"]
        if run.error is None and cpu.error is None:
            evidence = webgpu_verdict.gpu_evidence(run.info, run.gpu, run.console)
            vs_cpu = compare(run.outputs, cpu.outputs)
            vs_reference = compare(run.outputs, {n: refs.output("reference", n) for n in refs.names})
            fp16 = fp16_block(run, vs_cpu, evidence, model, hw, refs) if name == "webgpu-fp16" else None
            runs[name] = public_run(run, file=file, on_gpu=evidence, vs_cpu=vs_cpu, vs_reference=vs_reference,
                                    fp16=fp16)
        elif run.error is None:
            runs[name] = public_run(run, file=file, error=f"the CPU run it is compared with failed: {cpu.error}")
        else:
            runs[name] = public_run(run, file=file)
    return runs


def fp16_block(run: PageRun, vs_cpu: Comparison, evidence: OnGpu, model, hw: tuple[int, int],
               refs: References) -> WebFp16:
    """What the shaders of the FP16 run did, with depthport's prediction beside the measured rel. L2."""
    mode = webgpu_verdict.fp16_mode(run.gpu)
    predicted = fp16_predictions(model, hw, refs.eager_normalized, refs.images, refs.prompts)
    note, agrees = webgpu_verdict.prediction_note(vs_cpu.rel_l2_pooled, mode.mode, predicted)
    if webgpu_verdict.refused(evidence):  # the output is not FP16's doing: part of the model never ran
        note, agrees = f"{note.split(' (')[0]}: not comparable, {webgpu_verdict.refused(evidence)}", None
    return replace(mode, predicted=predicted, note=note, agrees=agrees)


def preprocess_check(wasm: PageRun, refs: References) -> PreprocessCheck:
    """The page's input tensors against depthport's (``preprocess.to_tensor``) on the same decoded pixels."""
    diffs = [float(np.abs(wasm.tensors[n] - refs.input(n, refs.eager_normalized)).max()) for n in refs.names]
    return PreprocessCheck(max_abs_diff=max(diffs), images=len(diffs), exact=max(diffs) == 0.0,
                           method="images sent to the page as PNG (lossless), decoded by the browser, resized and "
                                  "normalised by the page's JS; compared with depthport.preprocess.to_tensor on the "
                                  "same pixels")


@dataclass
class WebResult:
    """What verifying one web folder gives: the WASM run's parity record, report.json's ``browser`` section, the
    browser checks' verdicts, the first image's WASM depth and the page's screenshot (PNG bytes or None)."""

    parity: dict
    browser: Browser
    verdicts: dict
    depth: np.ndarray | None
    screenshot: bytes | None


def show(page, backend: str) -> tuple[Shown, bytes | None]:
    """The page as a person uses it: the bundled image on ``backend`` (FP32), then a screenshot (PNG bytes; None
    when the page failed)."""
    try:
        shown = page.show_bundled(backend, "fp32")
        return Shown(backend, ms=shown.get("ms")), page.screenshot()
    except RuntimeError as exc:
        return Shown(backend, error=error_text(exc)), None


def verify_folder(job: WebJob) -> WebResult:
    """Every requested backend of ``job.folder`` in headless Chromium (see the module's doc)."""
    gpu_wanted = any(n.startswith("webgpu") for n in job.backends)
    suffix = Path(job.config["model_file"]).suffix
    small = small_export(job.built, job.scratch, suffix, job.small) if gpu_wanted else None
    browser = chromium.shared_browser(job.fast_shaders)
    with serving(job.folder, {SMALL_URL: small.path} if small else None) as url:
        page = browser.open(url)
        try:
            adapter = page.call("() => window.depthport.page.gpu") or ""
            wasm = run_backend(page, "wasm", None, job.built.input_hw, job.refs.images, adapter, job.refs.prompts)
            runs = gpu_runs(page, job, adapter, wasm, small) if gpu_wanted and adapter else {}
            shown, png = show(page, "webgpu" if adapter and small is None and gpu_wanted else "wasm")
        finally:
            page.close()
    return assemble(job, browser, adapter, wasm, runs, small, shown, png)


def not_run_reason(job: WebJob, name: str, adapter: str) -> tuple[str, str]:
    """(why, cause) for a backend with no run."""
    from ..core.schema import SKIPPED, UNAVAILABLE

    if name not in job.backends:
        return f"{name} not requested (backends: {', '.join(job.backends)})", SKIPPED
    if name == "webgpu-fp16" and job.config["runtime"] == "onnxruntime-web":
        return "onnxruntime-web runs an FP32 model in FP32 only (no FP16 compute option)", UNAVAILABLE
    if not adapter:
        return "this Chromium has no WebGPU adapter", ERROR
    return f"{name} was not run", ERROR


def gpu_counters(gpu: dict | None) -> GpuCounters | None:
    """What the GPU probe counted (the page's record, ``web/gpu_probe.js``), and the last device's features; None
    when the probe saw nothing (WASM)."""
    if not gpu:
        return None
    granted = (gpu.get("devices") or [{}])[-1].get("granted")
    return GpuCounters(submits=gpu.get("submits"), dispatches=gpu.get("dispatches"), pipelines=gpu.get("pipelines"),
                       device_features=None if granted is None else tuple(granted))


def public_run(run: PageRun, **sections) -> BrowserRun:
    """A run as report.json keeps it, with the ``sections`` its caller adds (the file, the comparisons, or why it
    was not compared): no arrays, the GPU counters and the console lines that matter."""
    errors = webgpu_verdict.gpu_error_lines(run.console)
    kept = BrowserRun(name=run.name, shape=tuple(run.shape), error=run.error, info=run.info, time=run.time,
                      gpu=gpu_counters(run.gpu), console_fallback=tuple(webgpu_verdict.fallback_lines(run.console)),
                      console_gpu_errors=tuple(line.splitlines()[0] for line in errors)[:5])
    return replace(kept, **sections)


def assemble(job: WebJob, browser, adapter: str, wasm: PageRun, runs: dict[str, BrowserRun],
             small: SmallExport | None, shown: Shown, png: bytes | None) -> WebResult:
    refs = job.refs
    if wasm.error is not None:
        parity = failed_section(f"the page failed on WASM: {wasm.error}")
    else:
        parity = parity_record(wasm.outputs, refs, refs.label, "depthport eager model, same rewrites")
        parity.update(runtime=f"{job.config['runtime']} {job.config['runtime_version']} (WASM, {browser.version})")
        if refs.reference64 is None:
            parity.update(skipped=["fp64_error_ratio"])
    verdicts = {}
    for name, check, verdict in (("webgpu-fp32", "webgpu_fp32", webgpu_verdict.webgpu_fp32_verdict),
                                 ("webgpu-fp16", "webgpu_fp16", webgpu_verdict.webgpu_fp16_verdict)):
        why, cause = not_run_reason(job, name, adapter)
        verdicts[check] = verdict(runs[name]) if name in runs else Verdict.not_measured(why, cause)
    section = Browser(
        browser=browser.version, flags=tuple(browser.flags), driver=driver_version(), fast_shaders=job.fast_shaders,
        adapter=adapter or None, runtime=job.config["runtime"], runtime_version=job.config["runtime_version"],
        backends={"wasm": public_run(wasm), **runs},
        small_reexport=SmallReexport(tuple(small.hw), "WebGPU on SwiftShader emulates the GPU on the CPU: the WebGPU "
                                     "runs use a small re-export of the same model and rewrites") if small else None,
        shown=shown, preprocess=preprocess_check(wasm, refs) if wasm.error is None else None)
    depth = wasm.outputs[refs.names[0]] if wasm.error is None else None
    return WebResult(parity, section, verdicts, depth, png)


def driver_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"playwright {version('playwright')}"
    except PackageNotFoundError:
        return "playwright (version unknown)"


def record(art: dict | ArtifactJson, result: WebResult | None, error: str | None = None) -> None:
    """Put a web folder's results (or why there are none) into its artifact entry: ``parity`` (the gate judges it),
    ``browser`` and the required ``webgpu_fp32`` check beside the informative ``webgpu_fp16``."""
    art = ArtifactJson(art)
    if result is None:
        art.parity = failed_section(f"browser verification failed: {error}")
        art.set_check("webgpu_fp32", Verdict.not_measured(f"browser verification failed: {error}"), required=True)
        return
    art.update(parity=result.parity, browser=dump(result.browser))
    art.set_check("webgpu_fp32", result.verdicts["webgpu_fp32"], required=True)
    art.set_check("webgpu_fp16", result.verdicts["webgpu_fp16"], required=False)


def apply(ctx, report: dict | ReportJson, refs: References, figures: dict) -> None:
    """The verify stage's part for web folders: one shared browser, each folder's results into its artifact, the
    screenshot beside the report (and into report.html through ``figures``)."""
    from ..export.targets import WEB_TARGETS

    for art in (a for a in ReportJson(report).artifacts if a.target in WEB_TARGETS):
        ctx.detail(f"{art.file} in headless Chromium")
        job = WebJob(ctx.out_dir / art.file, refs, ctx.built, ctx.scratch, ctx.options.threads,
                     ctx.options.web_fast_shaders, small=ctx.small)
        try:
            result = verify_folder(job)
        except (InputError, RuntimeError, OSError) as exc:
            record(art, None, error_text(exc))
            continue
        record(art, result)
        if result.screenshot:
            name = f"{Path(art.file).name}_screenshot.png"
            (ctx.out_dir / name).write_bytes(result.screenshot)
            BrowserJson(art.browser).screenshot = name
            figures.setdefault("screenshots", {})[art.target] = result.screenshot
        if result.depth is not None:
            figures["variants"][f"{art.target} (Chromium, WASM)"] = result.depth
