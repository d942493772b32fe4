"""The model card: README.md of an export folder, rendered from report.json by ``templates/card.md.j2``.

Python prepares the data (numbers formatted, verdict texts from ``schema.Verdict``); the wording and the layout are
in the templates. ``roofline_view`` and ``machine_view`` are shared with report.html.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import jinja2
import yaml

from ..atomic import write_text
from ..core.formatting import fmt
from ..core.machine import describe
from ..core.schema import NOT_SHIPPED, SHIPPED, UNVERIFIED, read_report, verdict_of
from . import web
from .int8_advice import int8_view
from .snippets import snippets

TEMPLATES = Path(__file__).parent / "templates"
HF_LICENSES = {"Apache-2.0": "apache-2.0", "CC-BY-NC-4.0": "cc-by-nc-4.0"}
TAGS_BY_SUFFIX = {"tflite": ["litert", "tflite"], "pte": ["executorch", "pte"], "onnx": ["onnx"]}
LIBRARY_BY_SUFFIX = {"tflite": "litert", "pte": "executorch", "onnx": "onnx"}


def _cell(text) -> str:
    """Text made safe for one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


@functools.cache
def environment() -> jinja2.Environment:
    """Markdown templates (no autoescape): the card and the snippets it includes."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["cell"] = _cell
    return env


def front_matter(report: dict) -> dict:
    detail = report.get("weights_detail", {})
    tags = ["depth-estimation", "on-device"]
    for art in report.get("artifacts", []):
        for tag in TAGS_BY_SUFFIX.get(art["file"].rsplit(".", 1)[-1], []):
            if tag not in tags:
                tags.append(tag)
    if report.get("random_weights"):
        tags.append("random-weights")
    meta = {"license": HF_LICENSES.get(detail.get("licence"), "other"), "pipeline_tag": "depth-estimation",
            "tags": tags}
    kinds = [art["file"].rsplit(".", 1)[-1] for art in report.get("artifacts", [])]
    if kinds and kinds[0] in LIBRARY_BY_SUFFIX:
        meta["library_name"] = LIBRARY_BY_SUFFIX[kinds[0]]
    if report.get("base_model") and not report.get("random_weights"):
        meta["base_model"] = report["base_model"]
    return meta


def roofline_view(lat: dict) -> dict:
    """GMAC, GMAC/s and % of the GEMM peak beside one latency, formatted; None where not measured."""
    return {"gmac": fmt(lat.get("gmac"), ".3g", missing=None), "gmac_per_s": fmt(lat.get("gmac_per_s"), ".1f", missing=None),
            "pct_of_peak": fmt(lat.get("pct_of_peak"), ".1f", missing=None),
            "pct_of_mixed_peak": fmt(lat.get("pct_of_mixed_peak"), ".1f", missing=None),
            "gmac_why": (lat.get("macs") or {}).get("reason")}


def machine_view(report: dict) -> dict:
    """The machine the latencies were timed on (``bench.machine.describe``) and the GEMM peak they are compared
    with; None where not measured (an older report, a skipped probe), with why when the report says."""
    bench = report.get("bench") or {}
    info, probe, provenance = bench.get("machine"), bench.get("probe") or {}, report.get("machine") or {}
    return {"timed": bool(bench) or any("latency_ms" in a for a in report.get("artifacts", [])),
            "line": describe(info) if isinstance(info, dict) and info.get("cpu") else None,
            "cpu": provenance.get("cpu"), "cores": provenance.get("cores"),
            "peak": fmt(probe.get("peak_gmac_per_s"), ".1f", missing=None), "probe": probe.get("chain"),
            "peak_why": probe.get("skipped"), "method": bench.get("roofline_method")}


def _verdict(art: dict, check: str) -> str:
    v = verdict_of(art, check)
    return "-" if v is None else v.text()


def _latency(art: dict, bench: dict) -> dict:
    lat = art.get("latency_ms") or {}
    if lat.get("median") is None:
        return {"median": None, "why": lat.get("error") or art.get("parity_note")}
    return {"median": f"{lat['median']:.1f}", "rounds": lat.get("rounds", "?"), "iters": lat.get("iters", "?"),
            "threads": lat.get("threads"), "runtime": lat.get("runtime"),
            "short": "orientation" in str(bench.get("note", "")), **roofline_view(lat)}


def _delegation(art: dict) -> dict | None:
    d = art.get("delegation")
    if not d:
        return None
    total = (d.get("delegated") or 0) + (d.get("portable") or 0)
    return {"delegated": d.get("delegated"), "total": total, "subgraphs": d.get("subgraphs"),
            "share": f"{100 * d['delegated'] / total:.1f} %" if total else "-"}


def _parity_figures(art: dict) -> dict:
    p = art.get("parity") or {}
    return {"pearson_worst": fmt(p.get("pearson_worst"), ".6f"), "rel_l2_pooled": fmt(p.get("rel_l2_pooled"), ".3e"),
            "delta125_worst": fmt(p.get("delta125_worst"), ".4f")}


def variants(report: dict) -> list[dict]:
    """Every file written beside the card (shipped, or unverified with why)."""
    bench = report.get("bench") or {}
    return [{"file": art["file"], "target": art["target"], "shipped": art.get("status") == SHIPPED,
             "status": art.get("status", UNVERIFIED), "status_reason": art.get("status_reason", ""),
             "size": f"{art['bytes'] / 1e6:.1f}", "parity": _verdict(art, "parity"), **_parity_figures(art),
             "latency": _latency(art, bench), "gpu_static": _verdict(art, "gpu_static"),
             "gpu_runtime": _verdict(art, "gpu_runtime"), "delegation": _delegation(art)}
            for art in report.get("artifacts", []) if art.get("status", UNVERIFIED) != NOT_SHIPPED]


def parity_view(report: dict) -> dict:
    """What parity was measured against, or why it was not; the float64 comparison of each file that has one."""
    arts, budget = report.get("artifacts", []), report.get("evidence_budget") or {}
    measured = [a for a in arts if "pearson_worst" in (a.get("parity") or {})]
    fp64 = [{"file": a["file"], "vs_fp64": f"{a['parity']['vs_reference_fp64']['rel_l2_pooled']:.3g}",
             "upstream_vs_fp64": f"{a['parity']['upstream_fp32_vs_fp64']:.3g}",
             "ratio": f"{a['parity']['fp64_error_ratio']:.3f}"}
            for a in measured if a["parity"].get("fp64_error_ratio") is not None]
    return {"measured": len(measured), "total": len(arts),
            "reference": measured[0]["parity"].get("reference") if measured else None,
            "why_not": "; ".join(sorted({_verdict(a, "parity") for a in arts})),
            "fp64": fp64, "fp64_gate": report.get("gates", {}).get("fp32", {}).get("fp64_error_ratio", "-"),
            "evidence_line": budget.get("line"),
            "parity_subset": budget.get("parity_images", 0) < budget.get("images", 0)}


def not_shipped_view(report: dict) -> dict:
    arts = report.get("artifacts", [])
    return {"total": len(arts),
            "rows": [{"file": a["file"], "target": a["target"], **_parity_figures(a),
                      "why": a.get("status_reason", "-")} for a in arts if a.get("status") == NOT_SHIPPED],
            "unverified": [{"file": a["file"], "why": a.get("status_reason", "not checked")}
                           for a in arts if a.get("status", UNVERIFIED) == UNVERIFIED]}


def fp16_rows(report: dict) -> list[dict]:
    rows = []
    for art in report.get("artifacts", []):
        f = art.get("fp16_compute") or {}
        if verdict_of(art, "fp16_compute") is not None:
            rows.append({"file": art["file"], "verdict": _verdict(art, "fp16_compute"),
                         "rel_l2": fmt(f.get("rel_l2"), ".3e"), "pearson": fmt(f.get("pearson"), ".6f"),
                         "images": ", ".join(f.get("images", [])) or "-",
                         "first_bad_layer": fmt(f.get("first_bad_layer"))})
    return rows


def fp16_arithmetic_rows(report: dict) -> list[dict]:
    """fp16 .pte files: judged on FP16 arithmetic, measured on this CPU or on the emulated ARMv8.2-A CPU
    (``--fp16-arm64``), or predicted (XNNPACK's f16 kernels as on ARM)."""
    rows = []
    for art in report.get("artifacts", []):
        found = art.get("fp16_arithmetic")
        if found is not None and verdict_of(art, "fp16_arithmetic") is not None:
            emulated = found.get("emulated") or {}
            measured = emulated if emulated and "not_measured" not in emulated else None
            figures = (art.get("parity") if found.get("arithmetic") else measured or (found.get("prediction") or {})
                       .get("figures")) or {}
            cpu = found.get("cpu") or "-"
            rows.append({"file": art["file"], "verdict": _verdict(art, "fp16_arithmetic"),
                         "evidence": found.get("evidence", "-"),
                         "cpu": f"emulated ARMv8.2-A on {cpu}" if measured else cpu,
                         "rel_l2": fmt(figures.get("rel_l2_pooled"), ".3e"),
                         "delta": fmt(figures.get("delta125_worst"), ".4f")})
    return rows


def headroom_view(report: dict) -> dict | None:
    """The FP16 headroom seen on the verification images, per op kind (the first prediction that has it)."""
    for art in report.get("artifacts", []):
        prediction = art.get("fp16_compute") or (art.get("fp16_arithmetic") or {}).get("prediction") or {}
        rows = prediction.get("headroom_by_op")
        if rows:
            return {"rows": [{"op": r["op"], "max_abs": fmt(r["max_abs"], ".4g"),
                              "headroom": fmt(r["headroom"], ".3g")} for r in rows[:8]],
                    "images": ", ".join(prediction.get("images", [])) or "-",
                    "random": bool(report.get("random_weights"))}
    return None


def units_view(report: dict) -> dict | None:
    """The output's units line and, when metres need the focal length, the formula with a worked example: a photo
    with a 60 degree horizontal field of view stretched to the input (focal_px = W / (2 tan 30 degrees)). None for
    reports without ``output_units``."""
    units = report.get("output_units")
    if not units:
        return None
    view = {"line": units.get("line"), "to_metres": units.get("to_metres"), "focal": None}
    focal = units.get("focal_reference_px")
    if focal:
        _, _, h, w = report["input_shape"]
        focal_px = w / (2 * math.tan(math.radians(30)))
        view["focal"] = {"reference": f"{focal:g}", "w": w, "h": h, "focal_px": f"{focal_px:.1f}",
                         "value": "2.0", "metres": f"{2.0 * focal_px / focal:.2f}"}
    return view


def metres_errors(report: dict) -> list[dict]:
    """Each measured file's worst-image mean error against upstream in the output's unit (metric models only)."""
    label = (report.get("output_units") or {}).get("label")
    if not label:
        return []
    return [{"file": a["file"], "mean_abs": f"{a['parity']['mean_abs_worst']:.3g}", "unit": label}
            for a in report.get("artifacts", []) if (a.get("parity") or {}).get("mean_abs_worst") is not None]


def ledger_rows(report: dict) -> list[dict]:
    return [{"rewrite": e["rewrite"], "exact": e["exact"], "rel_l2_step": fmt(e["rel_l2_step"], ".2e"),
             "rel_l2_cumulative": fmt(e["rel_l2_cumulative"], ".2e"), "summary": e["summary"]}
            for e in report.get("rewrite_ledger") or []]


def ledger_at(report: dict) -> str:
    """Where the rewrite ledger was measured: 'the export shape', or '560x308 (...)' when the budget scaled it down."""
    hw, (_, _, h, w) = report.get("rewrite_ledger_hw"), report["input_shape"]
    if not hw or tuple(hw) == (h, w):
        return "the export shape"
    return (f"{hw[0]}x{hw[1]}, the export shape ({h}x{w}) scaled down by the evidence budget "
            "(`--evidence-images all` measures it at the export shape)")


def base_model_line(report: dict) -> str:
    """The weights' Hub repo, then what it says it was fine-tuned from: "a/b, fine-tuned from c/d"."""
    chain = report.get("base_model_chain") or [report.get("base_model")]
    chain = [c for c in chain if c]
    return ", fine-tuned from ".join(chain) if chain else "-"


def context(report: dict) -> dict:
    """Everything card.md.j2 reads."""
    machine = report.get("machine", {})
    detail = report.get("weights_detail", {})
    _, _, h, w = report["input_shape"]
    arts = report.get("artifacts", [])
    return {"front_matter": yaml.safe_dump(front_matter(report), sort_keys=False).strip(),
            "model": report["model"], "h": h, "w": w, "random_weights": bool(report.get("random_weights")),
            "source": {"weights": report.get("weights"), "format": detail.get("format"),
                       "revision": detail.get("revision") or "-", "licence": detail.get("licence"),
                       "licence_note": detail.get("licence_note"),
                       "base_model": base_model_line(report),
                       "pos_embed_formula": report.get("pos_embed_formula")},
            "normalization": report.get("normalization"), "output": report.get("output"),
            "units": units_view(report), "metres_errors": metres_errors(report),
            "output_shape": arts[0]["output_shape"] if arts else "",
            "machine_name": f"{machine.get('cpu', 'this machine')} ({machine.get('cores', '?')} cores)",
            "os": machine.get("os", ""), "bench_machine": machine_view(report), "variants": variants(report),
            "parity": parity_view(report), "not_shipped": not_shipped_view(report), "fp16": fp16_rows(report),
            "fp16_arithmetic": fp16_arithmetic_rows(report), "headroom": headroom_view(report),
            "ledger": ledger_rows(report), "ledger_at": ledger_at(report), "rewrites": report.get("rewrites", []),
            "snippets": snippets(report),
            "command": report.get("command"), "versions": report.get("versions", {}),
            "browser": web.browser_view(report), "shapes": web.shapes_view(report), "int8": int8_view(report)}


def render(report: dict) -> str:
    """The card's Markdown text."""
    return environment().get_template("card.md.j2").render(context(report))


def write_card(out_dir: str | Path) -> Path:
    """Regenerate out_dir/README.md from out_dir/report.json (validated against the schema)."""
    out_dir = Path(out_dir)
    card = out_dir / "README.md"
    write_text(card, render(read_report(out_dir / "report.json")))
    return card
