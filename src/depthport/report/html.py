"""report.html: one self-contained page (inline CSS, images as base64 PNG) from report.json and depth maps,
rendered by ``templates/report.html.j2`` with autoescape on.

``figures`` (optional) holds the first verification image and its depth maps:
``{"image_name", "image": PIL RGB, "input_hw", "reference": (H, W), "eager": (H, W) | None,
"variants": {label: (H, W)}}``. Depth maps share the reference's colour scale; each variant's error map is
|variant - reference| on its own scale (0 .. its maximum), in matplotlib's ``inferno``.
Python prepares the data (numbers formatted, verdicts as ``schema.Verdict``, images as data URIs); the wording
and the layout are in the template.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import io
import json
from pathlib import Path

import jinja2
import numpy as np
from PIL import Image

from ..atomic import write_bytes
from ..core.formatting import fmt
from ..core.report_model import Bench, Latency, NotMeasured, Parity, Report, Scores, Violation, load_report
from ..core.schema import FAIL, NOT_MEASURED, PASS, SHIPPED, Verdict
from ..visualize import colorize
from . import web
from .card import TEMPLATES, machine_view, roofline_view

MAX_SIDE, MIN_SIDE = 512, 192


def png_data_uri(img: Image.Image) -> str:
    """PNG data URI; large images scaled down to MAX_SIDE, tiny ones (tests, toy sizes) blown up by pixel repeat."""
    if max(img.size) < MIN_SIDE:
        factor = -(-MIN_SIDE // max(img.size))
        img = img.resize((img.width * factor, img.height * factor), Image.Resampling.NEAREST)
    if max(img.size) > MAX_SIDE:
        scale = MAX_SIDE / max(img.size)
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))),
                         Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def heatmap(err: np.ndarray, cmap: str = "inferno") -> tuple[Image.Image, float]:
    """|error| map -> (RGB image scaled 0..max, max)."""
    from matplotlib import colormaps

    err = np.abs(np.asarray(err, np.float64))
    top = float(err.max())
    scaled = err / top if top > 0 else err
    return Image.fromarray((colormaps[cmap](scaled)[..., :3] * 255).round().astype(np.uint8)), top


@functools.cache
def environment() -> jinja2.Environment:
    """HTML templates, autoescaped; ``is verdict`` tells a Verdict cell from text."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.tests["verdict"] = lambda value: isinstance(value, Verdict)
    env.globals.update(PASS=PASS, FAIL=FAIL, NOT_MEASURED=NOT_MEASURED)
    return env


def figures_view(figures: dict | None) -> dict | None:
    """The input, the depth maps on the reference's colour scale and the error maps, as data URIs."""
    if not figures:
        return None
    ref = np.asarray(figures["reference"], np.float64)
    lo, hi = float(np.percentile(ref, 2)), float(np.percentile(ref, 98))
    h, w = figures["input_hw"]
    eager = figures.get("eager")
    view = {"name": figures["image_name"], "h": h, "w": w,
            "input": png_data_uri(figures["image"].resize((w, h), Image.Resampling.BICUBIC)),
            "reference": png_data_uri(colorize(ref, lo=lo, hi=hi)),
            "eager": None if eager is None else png_data_uri(colorize(eager, lo=lo, hi=hi)),
            "variants": [], "errors": []}
    for label, out in figures["variants"].items():
        out = np.asarray(out, np.float64).reshape(ref.shape)
        view["variants"].append({"label": label, "uri": png_data_uri(colorize(out, lo=lo, hi=hi))})
        img, top = heatmap(out - ref)
        view["errors"].append({"label": label, "uri": png_data_uri(img), "top": f"{top:.3g}"})
    return view


def parity_rows(report: Report, key: str | None) -> list[dict]:
    """One row per file: its parity figures (``key``: a sub-comparison) or why there are none, and its gate."""
    rows = []
    for a in report.artifacts:
        p = a.parity
        if key:
            p = getattr(p, key) if isinstance(p, Parity) else None
        row = {"file": a.file, "precision": a.precision, "gate": a.verdict("parity")}
        if not isinstance(p, Parity) or not p.measured:
            rows.append({**row, "missing": p.reason if isinstance(p, NotMeasured) else "not measured"})
            continue
        rows.append({**row, "missing": None, "images": fmt(p.images),
                     "pearson_worst": fmt(p.pearson_worst, ".7f"), "pearson_median": fmt(p.pearson_median, ".7f"),
                     "rel_l2_pooled": fmt(p.rel_l2_pooled, ".3e"), "max_abs": fmt(p.max_abs, ".3e"),
                     "delta125_worst": fmt(p.delta125_worst, ".5f"), "delta125_median": fmt(p.delta125_median, ".5f")})
    return rows


def parity_view(report: Report) -> dict | None:
    ver = report.verify
    if ver is None:
        return None
    extra = {key: parity_rows(report, key)
             if any(isinstance(a.parity, Parity) and getattr(a.parity, key) is not None for a in report.artifacts)
             else None for key in ("vs_eager", "vs_reference_fp64")}
    return {"reference": ver.reference, "images": ", ".join(ver.images), "image_source": ver.image_source,
            "preprocess": ver.preprocess, "delta125": ver.delta125, "rows": parity_rows(report, None), **extra}


def accuracy_view(report: Report) -> dict | None:
    acc = report.accuracy
    if acc is None:
        return None

    def scores(a: Scores) -> dict:
        return {"abs_rel": fmt(a.abs_rel), "delta1": fmt(a.delta1), "valid_pixels": fmt(a.valid_pixels, "d")}

    return {"meaningful": acc.meaningful, "note": acc.note, "dataset": acc.dataset, "method": acc.method,
            "reference": scores(acc.reference),
            "baselines": [{"label": b.label, **scores(b)} for b in acc.baselines.values()],
            "rows": [{"file": a.file, **scores(a.accuracy)} for a in report.artifacts if a.accuracy is not None]}


def files_rows(report: Report) -> list[dict]:
    return [{"file": a.file, "target": a.target, "precision": a.precision, "mb": fmt(a.bytes / 1e6, ".1f"),
             "ops": fmt(a.op_count), "max_rank": fmt(a.max_tensor_rank), "status": a.status,
             "why": "" if a.status == SHIPPED else a.status_reason or "no check ran"}
            for a in report.artifacts]


def latency_view(report: Report) -> dict | None:
    """Each timed file's latency with GMAC, GMAC/s and % of the GEMM peak; the machine and the peak."""
    lat = [a for a in report.artifacts if a.latency_ms is not None]
    if not lat:
        return None
    first = next((a.median_ms for a in lat if a.median_ms is not None), None)
    rows = []
    for a in lat:
        m = a.latency_ms
        if not isinstance(m, Latency) or m.median is None:
            rows.append({"file": a.file, "error": m.reason if isinstance(m, NotMeasured) else "-"})
            continue
        rows.append({"file": a.file, "error": None, "runtime": m.runtime, "threads": fmt(m.threads, "d"),
                     "median": fmt(m.median, ".2f"), "min": fmt(m.min, ".2f"), "max": fmt(m.max, ".2f"),
                     "x_first": fmt(m.median / first, ".3f"), **roofline_view(m)})
    bench = report.bench or Bench()
    return {"method": bench.method, "note": bench.note, "machine": machine_view(report), "rows": rows}


def gpu_rows(report: Report) -> list[dict]:
    rows = []
    for a in report.artifacts:
        if not a.gpu_check:
            continue
        v = a.gpu_check.violations
        rows.append({"file": a.file, "static": a.verdict("gpu_static"), "runtime": a.verdict("gpu_runtime"),
                     "fp16": a.verdict("fp16_compute"), "violations": fmt(len(v), "d"),
                     "first": "; ".join(_violation_text(x) for x in v[:5]) + (" ..." if len(v) > 5 else "")})
    return rows


def fp64_rows(report: Report) -> list[dict]:
    gate = fmt(report.gates.fp32.fp64_error_ratio)
    return [{"file": a.file, "vs_fp64": fmt(p.vs_reference_fp64.rel_l2_pooled, ".3e"),
             "upstream_vs_fp64": fmt(p.upstream_fp32_vs_fp64, ".3e"), "ratio": fmt(p.fp64_error_ratio, ".3f"),
             "gate": gate}
            for a, p in ((a, a.parity) for a in report.artifacts)
            if isinstance(p, Parity) and p.fp64_error_ratio is not None]


def _violation_text(v: Violation) -> str:
    return f"op_index={v.op_index}, op={v.op}, rule={v.rule}"


def screenshot_uris(figures: dict | None) -> dict:
    """The browser screenshots (PNG bytes by target) as data URIs."""
    shots = (figures or {}).get("screenshots") or {}
    return {k: "data:image/png;base64," + base64.b64encode(v).decode("ascii") for k, v in shots.items() if v}


def context(data: dict, figures: dict | None = None) -> dict:
    """Everything report.html.j2 reads, from report.json's object."""
    report = load_report(data)

    def pairs(d: dict | None) -> str | None:
        return ", ".join(f"{k} {v}" for k, v in d.items()) if d and any(v is not None for v in d.values()) else None

    return {"model": report.model, "random_weights": report.random_weights, "weights": report.weights,
            "input_shape": list(report.input_shape), "command": report.command,
            "machine": pairs(dataclasses.asdict(report.machine)),
            "versions": pairs(report.versions), "figures": figures_view(figures),
            "parity": parity_view(report), "accuracy": accuracy_view(report), "files": files_rows(report),
            "latency": latency_view(report), "gpu": gpu_rows(report), "fp64": fp64_rows(report),
            "browser": web.browser_view(report, screenshot_uris(figures)), "shapes": web.shapes_view(report),
            "not_shipped": [{"file": n.file, "precision": n.precision, "reasons": "; ".join(n.reasons)}
                            for n in report.not_shipped],
            "raw": json.dumps(data, indent=1, default=str)}


def render(report: dict, figures: dict | None = None) -> str:
    return environment().get_template("report.html.j2").render(context(report, figures))


def write_html(path: str | Path, report: dict, figures: dict | None = None) -> Path:
    write_bytes(path, render(report, figures).encode("utf-8"))
    return Path(path)
