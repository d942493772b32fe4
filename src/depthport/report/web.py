"""What report.html and the card show of the browser runs (``artifacts[].browser``) and of dynamic-shape files
(``artifacts[].shapes_parity``): numbers formatted, verdicts as ``schema.Verdict``; the wording is in the templates
``browser.html.j2`` and ``browser.md.j2``."""

from __future__ import annotations

from ..core.formatting import fmt
from ..core.schema import Verdict, verdict_of

CHECKS = {"wasm": "parity", "webgpu-fp32": "webgpu_fp32", "webgpu-fp16": "webgpu_fp16"}
TITLES = {"wasm": "WASM (CPU)", "webgpu-fp32": "WebGPU FP32", "webgpu-fp16": "WebGPU FP16"}


def backend_row(art: dict, name: str) -> dict:
    """One backend of one web folder: where and how it ran, its figures, its time and its verdict."""
    runs = art["browser"].get("backends") or {}
    run = runs.get(name) or {}
    ref = (art.get("parity") or {}) if name == "wasm" else (run.get("vs_reference") or {})
    t, info, on_gpu = run.get("time") or {}, run.get("info") or {}, run.get("on_gpu") or {}
    where = run.get("file") or (art.get("web") or {}).get("model_file", "-")
    if on_gpu:
        gpu = ("yes: " if on_gpu.get("on_gpu") else "NO: ") + (
            f"{on_gpu.get('dispatches')} dispatches, compiled for {on_gpu.get('accelerator')}"
            if on_gpu.get("on_gpu") else "; ".join(on_gpu.get("problems", [])))
        if on_gpu.get("gpu_errors"):
            gpu += f"; but WebGPU reported {on_gpu['gpu_errors']} validation error(s): {on_gpu['gpu_error']}"
    else:
        gpu = "-"
    return {"name": TITLES[name], "shape": "x".join(map(str, run.get("shape", []))) or "-", "file": where,
            "error": run.get("error"), "accelerator": info.get("accelerator", "-"),
            "pearson": fmt(ref.get("pearson_worst"), ".7f"), "rel_l2": fmt(ref.get("rel_l2_pooled"), ".3e"),
            "delta125": fmt(ref.get("delta125_worst"), ".5f"),
            "vs_cpu": fmt((run.get("vs_cpu") or {}).get("rel_l2_pooled"), ".3e"), "on_gpu": gpu,
            "first_ms": fmt(t.get("first_ms"), ".1f"), "median_ms": fmt(t.get("median_ms"), ".1f"),
            "calls": t.get("calls"), "time_label": t.get("label", "-"), "verdict": verdict_of(art, CHECKS[name])}


def fp16_view(art: dict) -> dict | None:
    fp16 = ((art["browser"].get("backends") or {}).get("webgpu-fp16") or {}).get("fp16")
    if not fp16:
        return None
    predicted = fp16.get("predicted") or {}
    return {"mode": fp16["mode"], "evidence": fp16["evidence"], "note": fp16["note"], "agrees": fp16.get("agrees"),
            "storage": fmt(predicted.get("storage"), ".3e"), "arithmetic": fmt(predicted.get("arithmetic"), ".3e")}


def browser_view(report: dict, screenshots: dict | None = None) -> list[dict]:
    """One entry per web folder that was run in a browser."""
    out = []
    for art in report.get("artifacts", []):
        b = art.get("browser")
        if not b:
            continue
        pre = b.get("preprocess") or {}
        out.append({"file": art["file"], "target": art["target"], "runtime": f"{b['runtime']} {b['runtime_version']}",
                    "browser": b.get("browser"), "driver": b.get("driver"), "adapter": b.get("adapter") or "none",
                    "flags": " ".join(b.get("flags", [])), "fast_shaders": b.get("fast_shaders"),
                    "rows": [backend_row(art, n) for n in CHECKS], "fp16": fp16_view(art),
                    "small": b.get("small_reexport"),
                    "preprocess": None if not pre else {"max_abs_diff": fmt(pre.get("max_abs_diff"), ".3g"),
                                                        "images": pre.get("images"), "exact": pre.get("exact"),
                                                        "method": pre.get("method")},
                    "shown": b.get("shown") or {}, "screenshot_file": b.get("screenshot"),
                    "screenshot": (screenshots or {}).get(art["target"])})
    return out


def shapes_view(report: dict) -> list[dict]:
    """Each dynamic-shape file: the shapes it was verified at, with each shape's figures and gate."""
    out = []
    for art in report.get("artifacts", []):
        per_shape = art.get("shapes_parity")
        if per_shape is None:
            continue
        _, _, h, w = art["input_shape"]
        parity = art.get("parity") or {}
        rows = [{"shape": f"{h}x{w} (export)", "rel_l2": fmt(parity.get("rel_l2_pooled"), ".3e"),
                 "pearson": fmt(parity.get("pearson_worst"), ".7f"), "ratio": fmt(parity.get("fp64_error_ratio"), ".3f"),
                 "gate": verdict_of(art, "parity")}]
        if "error" not in per_shape:
            rows += [{"shape": hw, "rel_l2": fmt(v.get("rel_l2_pooled"), ".3e"), "pearson": fmt(v.get("pearson_worst"), ".7f"),
                      "ratio": fmt(v.get("fp64_error_ratio"), ".3f"), "gate": Verdict.from_dict(v["gate"])}
                     for hw, v in per_shape.items()]
        out.append({"file": art["file"], "dims": " x ".join(map(str, art.get("input_dims", []))), "rows": rows,
                    "error": per_shape.get("error"), "verdict": verdict_of(art, "parity_shapes")})
    return out
