"""report.html: one self-contained page (inline CSS, images as base64 PNG) from report.json and depth maps.

``figures`` (optional) holds the first verification image and its depth maps:
``{"image_name", "image": PIL RGB, "input_hw", "reference": (H, W), "eager": (H, W) | None,
"variants": {label: (H, W)}}``. Depth maps share the reference's colour scale; each variant's error map is
|variant - reference| on its own scale (0 .. its maximum), in matplotlib's ``inferno``.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

from ..atomic import write_bytes
from ..visualize import colorize
from .schema import FAIL, PASS, Verdict

MAX_SIDE, MIN_SIDE = 512, 192
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f4f4f4} td.l,th.l{text-align:left}
.banner{background:#b00020;color:#fff;font-weight:bold;padding:12px 16px;font-size:1.2em;margin:12px 0}
.fail{color:#b00020;font-weight:bold} .pass{color:#1b7f1b;font-weight:bold} .nm{color:#8a6d00;font-weight:bold}
.grid{display:flex;flex-wrap:wrap;gap:12px} figure{margin:0} figcaption{font-size:.85em;max-width:512px}
.meta{font-size:.85em;color:#555}
"""


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


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def fmt(value, spec: str = ".4g") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format(value, spec)
    return esc(value)


def table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Cells are already-escaped HTML; the first ``left`` columns are left-aligned."""
    head = "".join(f'<th class="l">{esc(h)}</th>' if i < left else f"<th>{esc(h)}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="l">{c}</td>' if i < left else f"<td>{c}</td>" for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def figure(img: Image.Image, caption: str, alt: str) -> str:
    """``caption`` is HTML; ``alt`` plain text."""
    return f'<figure><img src="{png_data_uri(img)}" alt="{esc(alt)}"><figcaption>{caption}</figcaption></figure>'


def figures_section(figures: dict | None) -> str:
    if not figures:
        return "<p>No depth maps (verification was skipped).</p>"
    ref = np.asarray(figures["reference"], np.float64)
    lo, hi = float(np.percentile(ref, 2)), float(np.percentile(ref, 98))
    h, w = figures["input_hw"]
    shown = figures["image"].resize((w, h), Image.Resampling.BICUBIC)
    name = figures["image_name"]
    depth = [figure(shown, f"input <b>{esc(name)}</b>, as the model sees it ({h}x{w})", f"input {name}"),
             figure(colorize(ref, lo=lo, hi=hi), "reference (upstream PyTorch)", "reference depth")]
    if figures.get("eager") is not None:
        depth.append(figure(colorize(figures["eager"], lo=lo, hi=hi), "depthport eager", "depthport eager depth"))
    errors = []
    for label, out in figures["variants"].items():
        out = np.asarray(out, np.float64).reshape(ref.shape)
        depth.append(figure(colorize(out, lo=lo, hi=hi), f"<b>{esc(label)}</b>", f"{label} depth"))
        img, top = heatmap(out - ref)
        errors.append(figure(img, f"|{esc(label)} - reference|, black 0 .. yellow {top:.3g}",
                             f"{label} error map"))
    return ('<p class="meta">Depth colours: Spectral_r between the reference\'s 2nd and 98th percentiles, '
            'shared by every map.</p>' f'<div class="grid">{"".join(depth)}</div>'
            f'<h3>Error maps</h3><div class="grid">{"".join(errors) or "<p>none</p>"}</div>')


def verdict_html(entry: dict | None) -> str:
    """A check's verdict in words: pass, FAIL: why, or not measured: why."""
    if not entry:
        return "-"
    v = Verdict.from_dict(entry)
    if v.state == PASS:
        return '<span class="pass">pass</span>' + (f" ({esc(v.reason)})" if v.reasons else "")
    if v.state == FAIL:
        return '<span class="fail">FAIL</span>: ' + esc(v.reason)
    return '<span class="nm">not measured</span>: ' + esc(v.reason)


def verdict(art: dict) -> str:
    return verdict_html((art.get("checks") or {}).get("parity") or art.get("gate"))


def parity_rows(report: dict, key: str | None) -> list[list[str]]:
    rows = []
    for a in report.get("artifacts", []):
        p = a.get("parity") or {}
        if key:
            p = p.get(key) or {}
        if "pearson_worst" not in p:
            rows.append([esc(a["file"]), esc(a.get("precision", "-")), esc(p.get("error") or p.get("not_measured") or "not measured")]
                        + ["-"] * 6 + ([verdict(a)] if not key else []))
            continue
        row = [esc(a["file"]), esc(a.get("precision", "-")), fmt(p["images"]), fmt(p["pearson_worst"], ".7f"),
               fmt(p["pearson_median"], ".7f"), fmt(p["rel_l2_pooled"], ".3e"), fmt(p["max_abs"], ".3e"),
               fmt(p["delta125_worst"], ".5f"), fmt(p["delta125_median"], ".5f")]
        rows.append(row + ([verdict(a)] if not key else []))
    return rows


PARITY_HEAD = ["file", "precision", "images", "corr worst", "corr median", "rel L2 pooled", "max |diff|",
               "δ<1.25 worst", "δ<1.25 median"]


def tables_section(report: dict) -> str:
    arts = report.get("artifacts", [])
    ver = report.get("verify", {})
    out = []
    if ver:
        out.append(f"<h2>Parity</h2><p class=\"meta\">Against {esc(ver.get('reference'))}; images: "
                   f"{esc(', '.join(ver.get('images', [])))} ({esc(ver.get('image_source'))}); "
                   f"{esc(ver.get('preprocess'))}. δ&lt;1.25: {esc(ver.get('delta125'))}.</p>")
        out.append(table(PARITY_HEAD + ["gate"], parity_rows(report, None), left=2))
        for key, title in (("vs_eager", "Against depthport's own eager model (converter error only)"),
                           ("vs_reference_fp64", "Against the upstream model in float64 (no reference rounding)")):
            if any(key in (a.get("parity") or {}) for a in arts):
                out.append(f"<h3>{esc(title)}</h3>" + table(PARITY_HEAD, parity_rows(report, key), left=2))
    acc = report.get("accuracy")
    if acc:
        rows = [["reference (upstream PyTorch)", fmt(acc["reference"]["abs_rel"]), fmt(acc["reference"]["delta1"]),
                 fmt(acc["reference"]["valid_pixels"], "d")]]
        rows += [[esc(a["file"]), fmt(a["accuracy"]["abs_rel"]), fmt(a["accuracy"]["delta1"]),
                  fmt(a["accuracy"]["valid_pixels"], "d")] for a in arts if a.get("accuracy")]
        warn = "" if acc.get("meaningful") else f'<p class="fail">{esc(acc.get("note"))}</p>'
        out.append(f"<h2>Accuracy against ground truth</h2>{warn}<p class=\"meta\">{esc(acc.get('dataset'))}. "
                   f"{esc(acc.get('method', ''))}</p>" + table(["model", "AbsRel", "δ1", "valid pixels"], rows))
    out.append("<h2>Files</h2>" + table(
        ["file", "target", "precision", "MB", "ops", "max rank", "status", "why"],
        [[esc(a["file"]), esc(a["target"]), esc(a.get("precision", "-")), fmt(a["bytes"] / 1e6, ".1f"),
          fmt(a.get("op_count")), fmt(a.get("max_tensor_rank")), esc(a.get("status", "unverified")),
          esc("" if a.get("status") == "shipped" else a.get("status_reason", "no check ran"))] for a in arts],
        left=3))
    lat = [a for a in arts if a.get("latency_ms")]
    if lat:
        first = next((a["latency_ms"]["median"] for a in lat if "median" in a["latency_ms"]), None)
        rows = []
        for a in lat:
            m = a["latency_ms"]
            if "median" not in m:
                rows.append([esc(a["file"]), esc(m.get("error", "-"))] + ["-"] * 5)
                continue
            rows.append([esc(a["file"]), esc(m["runtime"]), fmt(m["threads"], "d"), fmt(m["median"], ".2f"),
                         fmt(m["min"], ".2f"), fmt(m["max"], ".2f"), fmt(m["median"] / first, ".3f")])
        bench = report.get("bench", {})
        out.append(f"<h2>Latency (CPU)</h2><p class=\"meta\">{esc(bench.get('method', ''))}; "
                   f"{esc(bench.get('note', ''))}</p>"
                   + table(["file", "runtime", "threads", "median ms", "min ms", "max ms", "x first"], rows, left=2))
    gpu = [a for a in arts if a.get("gpu_check")]
    if gpu:
        rows = []
        for a in gpu:
            v = a["gpu_check"].get("violations") or []
            checks = a.get("checks") or {}
            rows.append([esc(a["file"]), verdict_html(checks.get("gpu_static")), verdict_html(checks.get("gpu_runtime")),
                         verdict_html(checks.get("fp16_compute")), fmt(len(v), "d"),
                         esc("; ".join(_violation_text(x) for x in v[:5]) + (" ..." if len(v) > 5 else ""))])
        out.append("<h2>GPU delegate check</h2><p class=\"meta\">When the real accelerator ran, its verdict decides "
                   "for the GPU targets; the static verdict is shown beside it.</p>"
                   + table(["file", "static rules", "real GPU accelerator", "FP16 compute (predicted)", "violations",
                            "first violations"], rows, left=1))
    fp32 = [a for a in arts if (a.get("parity") or {}).get("fp64_error_ratio") is not None]
    if fp32:
        out.append("<h2>Against float64</h2>" + table(
            ["file", "file vs float64", "upstream FP32 vs float64", "ratio", "gate"],
            [[esc(a["file"]), fmt(a["parity"]["vs_reference_fp64"]["rel_l2_pooled"], ".3e"),
              fmt(a["parity"]["upstream_fp32_vs_fp64"], ".3e"), fmt(a["parity"]["fp64_error_ratio"], ".3f"),
              fmt((report.get("gates") or {}).get("fp32", {}).get("fp64_error_ratio"))] for a in fp32], left=1))
    if report.get("not_shipped"):
        out.append("<h2>Not shipped</h2><p>These variants did not earn a slot; their files are in "
                   "<code>not-shipped/</code>.</p>" + table(
                       ["file", "precision", "reasons"],
                       [[esc(n["file"]), esc(n.get("precision")), esc("; ".join(n["reasons"]))]
                        for n in report["not_shipped"]], left=3))
    return "".join(out)


def _violation_text(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={v[k]}" for k in list(v)[:3])
    return str(v)


def render(report: dict, figures: dict | None = None) -> str:
    title = f"depthport report: {report.get('model', '?')}"
    banner = ""
    if report.get("random_weights"):
        banner = ('<div class="banner">RANDOM WEIGHTS: the reference and every file are random networks. Parity '
                  "still tests the conversion; depth and accuracy mean nothing.</div>")
    meta = [f"weights: {esc(report.get('weights'))}", f"input: {esc(report.get('input_shape'))}"]
    if report.get("command"):
        meta.append(f"command: <code>{esc(report['command'])}</code>")
    if report.get("machine"):
        meta.append("machine: " + esc(", ".join(f"{k} {v}" for k, v in report["machine"].items())))
    if report.get("versions"):
        meta.append("versions: " + esc(", ".join(f"{k} {v}" for k, v in report["versions"].items())))
    body = (f"<h1>{esc(title)}</h1>{banner}<p class=\"meta\">{'<br>'.join(meta)}</p>"
            f"<h2>Depth maps</h2>{figures_section(figures)}{tables_section(report)}"
            f"<h2>report.json</h2><details><summary>raw</summary><pre>{esc(json.dumps(report, indent=1, default=str))}"
            "</pre></details>")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")


def write_html(path: str | Path, report: dict, figures: dict | None = None) -> Path:
    write_bytes(path, render(report, figures).encode("utf-8"))
    return Path(path)
