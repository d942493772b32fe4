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
import functools
import io
import json
from pathlib import Path

import jinja2
import numpy as np
from PIL import Image

from ..atomic import write_bytes
from ..core.formatting import fmt
from ..core.schema import FAIL, NOT_MEASURED, PASS, Verdict
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


def _verdict(entry: dict | None) -> Verdict | None:
    return Verdict.from_dict(entry) if entry else None


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


def parity_rows(report: dict, key: str | None) -> list[dict]:
    """One row per file: its parity figures (``key``: a sub-comparison) or why there are none, and its gate."""
    rows = []
    for a in report.get("artifacts", []):
        p = a.get("parity") or {}
        if key:
            p = p.get(key) or {}
        row = {"file": a["file"], "precision": a.get("precision", "-"),
               "gate": _verdict((a.get("checks") or {}).get("parity"))}
        if "pearson_worst" not in p:
            rows.append({**row, "missing": p.get("error") or p.get("not_measured") or "not measured"})
            continue
        rows.append({**row, "missing": None, "images": fmt(p["images"]),
                     "pearson_worst": fmt(p["pearson_worst"], ".7f"), "pearson_median": fmt(p["pearson_median"], ".7f"),
                     "rel_l2_pooled": fmt(p["rel_l2_pooled"], ".3e"), "max_abs": fmt(p["max_abs"], ".3e"),
                     "delta125_worst": fmt(p["delta125_worst"], ".5f"),
                     "delta125_median": fmt(p["delta125_median"], ".5f")})
    return rows


def parity_view(report: dict) -> dict | None:
    ver = report.get("verify")
    if not ver:
        return None
    arts = report.get("artifacts", [])
    extra = {key: parity_rows(report, key) if any(key in (a.get("parity") or {}) for a in arts) else None
             for key in ("vs_eager", "vs_reference_fp64")}
    return {"reference": ver.get("reference"), "images": ", ".join(ver.get("images", [])),
            "image_source": ver.get("image_source"), "preprocess": ver.get("preprocess"),
            "delta125": ver.get("delta125"), "rows": parity_rows(report, None), **extra}


def accuracy_view(report: dict) -> dict | None:
    acc = report.get("accuracy")
    if not acc:
        return None

    def scores(a: dict) -> dict:
        return {"abs_rel": fmt(a["abs_rel"]), "delta1": fmt(a["delta1"]), "valid_pixels": fmt(a["valid_pixels"], "d")}

    return {"meaningful": bool(acc.get("meaningful")), "note": acc.get("note"), "dataset": acc.get("dataset"),
            "method": acc.get("method", ""), "reference": scores(acc["reference"]),
            "baselines": [{"label": b["label"], **scores(b)} for b in (acc.get("baselines") or {}).values()],
            "rows": [{"file": a["file"], **scores(a["accuracy"])} for a in report.get("artifacts", [])
                     if a.get("accuracy")]}


def files_rows(report: dict) -> list[dict]:
    return [{"file": a["file"], "target": a["target"], "precision": a.get("precision", "-"),
             "mb": fmt(a["bytes"] / 1e6, ".1f"), "ops": fmt(a.get("op_count")),
             "max_rank": fmt(a.get("max_tensor_rank")),
             "status": a.get("status", "unverified"),
             "why": "" if a.get("status") == "shipped" else a.get("status_reason", "no check ran")}
            for a in report.get("artifacts", [])]


def latency_view(report: dict) -> dict | None:
    """Each timed file's latency with GMAC, GMAC/s and % of the GEMM peak; the machine and the peak."""
    lat = [a for a in report.get("artifacts", []) if a.get("latency_ms")]
    if not lat:
        return None
    first = next((a["latency_ms"]["median"] for a in lat if "median" in a["latency_ms"]), None)
    rows = []
    for a in lat:
        m = a["latency_ms"]
        if "median" not in m:
            rows.append({"file": a["file"], "error": m.get("error", "-")})
            continue
        rows.append({"file": a["file"], "error": None, "runtime": m["runtime"], "threads": fmt(m["threads"], "d"),
                     "median": fmt(m["median"], ".2f"), "min": fmt(m["min"], ".2f"), "max": fmt(m["max"], ".2f"),
                     "x_first": fmt(m["median"] / first, ".3f"), **roofline_view(m)})
    bench = report.get("bench") or {}
    return {"method": bench.get("method", ""), "note": bench.get("note", ""), "machine": machine_view(report),
            "rows": rows}


def gpu_rows(report: dict) -> list[dict]:
    rows = []
    for a in report.get("artifacts", []):
        if not a.get("gpu_check"):
            continue
        v = a["gpu_check"].get("violations") or []
        checks = a.get("checks") or {}
        rows.append({"file": a["file"], "static": _verdict(checks.get("gpu_static")),
                     "runtime": _verdict(checks.get("gpu_runtime")), "fp16": _verdict(checks.get("fp16_compute")),
                     "violations": fmt(len(v), "d"),
                     "first": "; ".join(_violation_text(x) for x in v[:5]) + (" ..." if len(v) > 5 else "")})
    return rows


def fp64_rows(report: dict) -> list[dict]:
    gate = fmt((report.get("gates") or {}).get("fp32", {}).get("fp64_error_ratio"))
    return [{"file": a["file"], "vs_fp64": fmt(a["parity"]["vs_reference_fp64"]["rel_l2_pooled"], ".3e"),
             "upstream_vs_fp64": fmt(a["parity"]["upstream_fp32_vs_fp64"], ".3e"),
             "ratio": fmt(a["parity"]["fp64_error_ratio"], ".3f"), "gate": gate}
            for a in report.get("artifacts", []) if (a.get("parity") or {}).get("fp64_error_ratio") is not None]


def _violation_text(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={v[k]}" for k in list(v)[:3])
    return str(v)


def screenshot_uris(figures: dict | None) -> dict:
    """The browser screenshots (PNG bytes by target) as data URIs."""
    shots = (figures or {}).get("screenshots") or {}
    return {k: "data:image/png;base64," + base64.b64encode(v).decode("ascii") for k, v in shots.items() if v}


def context(report: dict, figures: dict | None = None) -> dict:
    """Everything report.html.j2 reads."""
    def pairs(d: dict | None) -> str | None:
        return ", ".join(f"{k} {v}" for k, v in d.items()) if d else None

    return {"model": report.get("model", "?"), "random_weights": bool(report.get("random_weights")),
            "weights": report.get("weights"), "input_shape": report.get("input_shape"),
            "command": report.get("command"), "machine": pairs(report.get("machine")),
            "versions": pairs(report.get("versions")), "figures": figures_view(figures),
            "parity": parity_view(report), "accuracy": accuracy_view(report), "files": files_rows(report),
            "latency": latency_view(report), "gpu": gpu_rows(report), "fp64": fp64_rows(report),
            "browser": web.browser_view(report, screenshot_uris(figures)), "shapes": web.shapes_view(report),
            "not_shipped": [{"file": n["file"], "precision": n.get("precision"), "reasons": "; ".join(n["reasons"])}
                            for n in report.get("not_shipped") or []],
            "raw": json.dumps(report, indent=1, default=str)}


def render(report: dict, figures: dict | None = None) -> str:
    return environment().get_template("report.html.j2").render(context(report, figures))


def write_html(path: str | Path, report: dict, figures: dict | None = None) -> Path:
    write_bytes(path, render(report, figures).encode("utf-8"))
    return Path(path)
