"""What report.html and the card show of the browser runs (``Artifact.browser``) and of dynamic-shape files
(``Artifact.shapes_parity``): numbers formatted, verdicts as ``schema.Verdict``; the wording is in the templates
``browser.html.j2`` and ``browser.md.j2``."""

from __future__ import annotations

from ..core.formatting import fmt
from ..core.report_model import Artifact, BrowserRun, Comparison, NotMeasured, Parity, Report, RunInfo, RunTime

CHECKS = {"wasm": "parity", "webgpu-fp32": "webgpu_fp32", "webgpu-fp16": "webgpu_fp16"}
TITLES = {"wasm": "WASM (CPU)", "webgpu-fp32": "WebGPU FP32", "webgpu-fp16": "WebGPU FP16"}
NO_FIGURES = Parity()


def figures_of(section) -> Parity | Comparison:
    """A section's figures (a file's parity, a browser run's comparison), or empty ones where it holds none (not
    measured, or absent)."""
    return section if isinstance(section, (Parity, Comparison)) else NO_FIGURES


def on_gpu_text(run: BrowserRun) -> str:
    g = run.on_gpu
    if g is None:
        return "-"
    text = (f"yes: {g.dispatches} dispatches, compiled for {g.accelerator}" if g.on_gpu
            else "NO: " + "; ".join(g.problems))
    if g.gpu_errors:
        text += f"; but WebGPU reported {g.gpu_errors} validation error(s): {g.gpu_error}"
    return text


def backend_row(art: Artifact, name: str) -> dict:
    """One backend of one web folder: where and how it ran, its figures, its time and its verdict."""
    run = (art.browser.backends.get(name) if art.browser else None) or BrowserRun()
    ref = figures_of(art.parity if name == "wasm" else run.vs_reference)
    info, t = run.info or RunInfo(), run.time or RunTime()  # a run that failed has neither
    where = run.file or (art.web.model_file if art.web else "-")
    return {"name": TITLES[name], "shape": "x".join(map(str, run.shape)) or "-", "file": where,
            "error": run.error, "accelerator": fmt(info.accelerator),
            "pearson": fmt(ref.pearson_worst, ".7f"), "rel_l2": fmt(ref.rel_l2_pooled, ".3e"),
            "delta125": fmt(ref.delta125_worst, ".5f"), "vs_cpu": fmt(figures_of(run.vs_cpu).rel_l2_pooled, ".3e"),
            "on_gpu": on_gpu_text(run), "first_ms": fmt(t.first_ms, ".1f"), "median_ms": fmt(t.median_ms, ".1f"),
            "calls": t.calls, "time_label": t.label, "verdict": art.verdict(CHECKS[name])}


def fp16_view(art: Artifact) -> dict | None:
    run = art.browser.backends.get("webgpu-fp16")
    fp16 = run.fp16 if run else None
    if fp16 is None:
        return None
    return {"mode": fp16.mode, "evidence": fp16.evidence, "note": fp16.note, "agrees": fp16.agrees,
            "storage": fmt(fp16.predicted.storage, ".3e"), "arithmetic": fmt(fp16.predicted.arithmetic, ".3e")}


def browser_view(report: Report, screenshots: dict | None = None) -> list[dict]:
    """One entry per web folder that was run in a browser."""
    out = []
    for art in report.artifacts:
        b = art.browser
        if b is None:
            continue
        pre = b.preprocess
        small = b.small_reexport
        out.append({"file": art.file, "target": art.target, "runtime": f"{b.runtime} {b.runtime_version}",
                    "browser": b.browser, "driver": b.driver, "adapter": b.adapter or "none",
                    "flags": " ".join(b.flags), "fast_shaders": b.fast_shaders,
                    "rows": [backend_row(art, n) for n in CHECKS], "fp16": fp16_view(art),
                    "small": None if small is None else {"shape": list(small.shape), "why": small.why},
                    "preprocess": None if pre is None else {"max_abs_diff": fmt(pre.max_abs_diff, ".3g"),
                                                            "images": pre.images, "exact": pre.exact,
                                                            "method": pre.method},
                    "shown": b.shown, "screenshot_file": b.screenshot,
                    "screenshot": (screenshots or {}).get(art.target)})
    return out


def shape_row(shape: str, parity: Parity, gate) -> dict:
    return {"shape": shape, "rel_l2": fmt(parity.rel_l2_pooled, ".3e"), "pearson": fmt(parity.pearson_worst, ".7f"),
            "ratio": fmt(parity.fp64_error_ratio, ".3f"), "gate": gate}


def shapes_view(report: Report) -> list[dict]:
    """Each dynamic-shape file: the shapes it was verified at, with each shape's figures and gate."""
    out = []
    for art in report.artifacts:
        per_shape = art.shapes_parity
        if per_shape is None:
            continue
        _, _, h, w = art.input_shape
        rows = [shape_row(f"{h}x{w} (export)", figures_of(art.parity), art.verdict("parity"))]
        if not isinstance(per_shape, NotMeasured):
            rows += [shape_row(hw, v, v.gate) for hw, v in per_shape.items()]
        out.append({"file": art.file, "dims": " x ".join(map(str, art.input_dims)), "rows": rows,
                    "error": per_shape.reason if isinstance(per_shape, NotMeasured) else None,
                    "verdict": art.verdict("parity_shapes")})
    return out
