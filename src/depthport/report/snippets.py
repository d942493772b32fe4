"""Integration snippets for the exported files: the data each one needs (real names, shapes, preprocessing, GPU
precision); the code itself is in ``templates/snippets/``, included by the card template."""

from __future__ import annotations

import math

from ..core.report_model import Artifact, Fp16Prediction, Report, Units
from ..core.schema import NOT_SHIPPED
from ..spec import focal_formula

TEMPLATES = {"tflite": ("kotlin_litert.kt.j2", "python.py.j2"), "pte": ("swift_executorch.swift.j2", "python.py.j2"),
             "onnx": ("python.py.j2",)}
MEANING = {"depth": "depth up to scale (larger = farther)"}
DEFAULT_MEANING = "relative inverse depth (larger = nearer)"


def units_view(report: Report) -> dict:
    """What the snippets say about the output's units (report.json ``output_units``; older reports: none).

    ``meaning`` is the comment beside the output; ``metric`` whether the app gets metres; ``focal_reference``
    set when metres need the camera's focal length (metres = value x focal_px / focal_reference)."""
    units = report.output_units or Units()
    meaning = MEANING.get(report.output_space, DEFAULT_MEANING)
    if units.meaning == "metres" and units.max_depth_m is None:
        meaning = "depth in metres, within the prompt's range (larger = farther)"
    elif units.meaning == "metres":
        meaning = f"depth in metres, 0 to {units.max_depth_m:g} m (larger = farther)"
    elif units.focal_reference_px:
        meaning = f"canonical depth: {focal_formula(units.focal_reference_px)} (larger = farther)"
    focal = units.focal_reference_px
    return {"meaning": meaning, "metric": units.metric, "focal_reference": f"{focal:g}" if focal else None}


def gpu_precision(report: Report, art: Artifact) -> tuple[str, str]:
    """("FP32" | "FP16" | "FP16_WITH_FP32_ACCUM", why), LiteRT's ``GpuOptions.Precision`` names. FP16 only when
    the FP16-compute prediction passed on every verification image with trained weights (measured headroom);
    FP16 tensors with FP32 accumulation when only that mode was predicted to pass; FP32 otherwise."""
    check = art.verdict("fp16_compute")
    prediction = art.fp16_compute or Fp16Prediction()
    verified = set(report.verify.images if report.verify else ())
    covered = bool(verified) and verified <= set(prediction.images)
    if report.random_weights:
        return "FP32", ("the weights are random: the FP16 headroom of trained weights (their outlier channels and "
                        "high-norm tokens) was not measured, so FP16 is not recommended on a random-weights "
                        "prediction alone")
    if check is not None and check.ok and covered:
        return "FP16", (f"FP16 compute was predicted within tolerance on all {len(verified)} verification images, "
                        f"headroom {headroom_text(prediction)}")
    if check is not None and check.ok:
        return "FP32", "the FP16-compute prediction did not cover every verification image"
    accum = prediction.fp16_with_fp32_accum
    if accum is not None and not accum.needs_enforce_f32 and covered:
        return "FP16_WITH_FP32_ACCUM", ("plain FP16 misses the tolerance, FP16 tensors with FP32 accumulation were "
                                        f"predicted within it (rel. L2 {accum.rel_l2:.3g})")
    why = (check.reason if check is not None else "") or "the FP16-compute prediction was not measured"
    return "FP32", f"FP16 compute is not proven safe for this file ({why})"


def headroom_text(prediction: Fp16Prediction) -> str:
    """'84x (linear)': the smallest FP16 headroom over op kinds, or 'not measured'."""
    rows = [r for r in prediction.headroom_by_op if r.headroom]
    if not rows:
        return "not measured"
    low = min(rows, key=lambda r: r.headroom)
    return f"{low.headroom:.3g}x ({low.op})"


def snippet_view(report: Report, art: Artifact, kind: str, template: str) -> dict:
    """What one snippet template reads: the file, its shapes, its preprocessing and the GPU precision to set."""
    _, _, h, w = art.input_shape
    precision, why = gpu_precision(report, art)
    prompt = report.prompt_shape
    out_shape = list(art.output_shape)
    return {"template": "snippets/" + template, "kind": kind, "file": art.file,
            "stem": art.file.rsplit(".", 1)[0], "h": h, "w": w, "input_shape": [1, 3, h, w],
            "output_shape": out_shape, "output_tuple": str(tuple(out_shape)), "output_size": math.prod(out_shape),
            "normalized": "folded" not in report.normalization, **units_view(report),
            "gpu_precision": precision, "gpu_precision_why": why, "backend": art.backend, "precision": art.precision,
            "resize": resize_kind(report),
            "prompt": {"h": prompt[2], "w": prompt[3], "tuple": str(tuple(prompt))} if prompt else None,
            "litert_version": report.versions.get("ai-edge-litert", "2.3.0"),
            "executorch_version": report.versions.get("executorch", "1.5.1")}


def resize_kind(report: Report) -> str:
    """How the report's model family resizes a photo to the export shape: "da3" (Depth Anything 3's area/cubic
    resize, ``preprocess.da3_input``) or "bicubic" (a bicubic stretch, ``preprocess.to_tensor``)."""
    from ..preprocess import da3_input
    from ..registry import MODELS

    spec = MODELS.get(report.model)
    return "da3" if spec is not None and spec.arch.preprocess is da3_input else "bicubic"


def snippets(report: Report) -> list[dict]:
    """One view per snippet: for each runtime kind shipped, its first file's snippets, in report order."""
    out, seen = [], set()
    for art in report.artifacts:
        if art.status == NOT_SHIPPED or art.kind in seen or art.web:  # web: a served page
            continue
        seen.add(art.kind)
        out += [snippet_view(report, art, art.kind, name) for name in TEMPLATES.get(art.kind, ("python.py.j2",))]
    return out
