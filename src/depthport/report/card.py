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
from ..core.report_model import (Artifact, Bench, Delegation, Fp16Prediction, Latency, NotMeasured, Parity,
                                 PredictionFigures, Report, load_report)
from ..core.schema import NOT_SHIPPED, SHIPPED, UNVERIFIED, read_report
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


def front_matter(report: Report) -> dict:
    tags = ["depth-estimation", "on-device"]
    for art in report.artifacts:
        for tag in TAGS_BY_SUFFIX.get(art.kind, []):
            if tag not in tags:
                tags.append(tag)
    if report.random_weights:
        tags.append("random-weights")
    meta = {"license": HF_LICENSES.get(report.weights_detail.licence, "other"), "pipeline_tag": "depth-estimation",
            "tags": tags}
    if report.artifacts and report.artifacts[0].kind in LIBRARY_BY_SUFFIX:
        meta["library_name"] = LIBRARY_BY_SUFFIX[report.artifacts[0].kind]
    if report.base_model and not report.random_weights:
        meta["base_model"] = report.base_model
    return meta


def roofline_view(lat: Latency) -> dict:
    """GMAC, GMAC/s and % of the GEMM peak beside one latency, formatted; None where not measured."""
    return {"gmac": fmt(lat.gmac, ".3g", missing=None), "gmac_per_s": fmt(lat.gmac_per_s, ".1f", missing=None),
            "pct_of_peak": fmt(lat.pct_of_peak, ".1f", missing=None),
            "pct_of_mixed_peak": fmt(lat.pct_of_mixed_peak, ".1f", missing=None), "gmac_why": lat.macs.reason}


def machine_view(report: Report) -> dict:
    """The machine the latencies were timed on (``bench.machine.describe``) and the GEMM peak they are compared
    with; None where not measured (an older report, a skipped probe), with why when the report says."""
    bench = report.bench or Bench()
    info, probe = bench.machine, bench.probe
    return {"timed": report.bench is not None or any(a.latency_ms is not None for a in report.artifacts),
            "line": describe(info) if info is not None and info.cpu else None,
            "cpu": report.machine.cpu, "cores": report.machine.cores,
            "peak": fmt(probe.peak_gmac_per_s, ".1f", missing=None), "probe": probe.chain,
            "peak_why": probe.skipped, "method": bench.roofline_method}


def _verdict(art: Artifact, check: str) -> str:
    v = art.verdict(check)
    return "-" if v is None else v.text()


def _latency(art: Artifact, bench: Bench | None) -> dict:
    lat = art.latency_ms
    if not isinstance(lat, Latency) or lat.median is None:
        return {"median": None, "why": lat.reason if isinstance(lat, NotMeasured) else art.parity_note}
    return {"median": f"{lat.median:.1f}", "rounds": lat.rounds, "iters": lat.iters, "threads": lat.threads,
            "runtime": lat.runtime, "short": bench is not None and "orientation" in bench.note,
            **roofline_view(lat)}


def _delegation(art: Artifact) -> dict | None:
    d = art.delegation
    if d is None or d == Delegation():
        return None
    total = d.delegated + d.portable
    return {"delegated": d.delegated, "total": total, "subgraphs": d.subgraphs,
            "share": f"{100 * d.delegated / total:.1f} %" if total else "-"}


def _parity_figures(art: Artifact) -> dict:
    p = art.parity if isinstance(art.parity, Parity) else Parity()
    return {"pearson_worst": fmt(p.pearson_worst, ".6f"), "rel_l2_pooled": fmt(p.rel_l2_pooled, ".3e"),
            "delta125_worst": fmt(p.delta125_worst, ".4f")}


def variants(report: Report) -> list[dict]:
    """Every file written beside the card (shipped, or unverified with why)."""
    return [{"file": art.file, "target": art.target, "shipped": art.status == SHIPPED, "status": art.status,
             "status_reason": art.status_reason, "size": f"{art.bytes / 1e6:.1f}", "parity": _verdict(art, "parity"),
             **_parity_figures(art), "latency": _latency(art, report.bench), "gpu_static": _verdict(art, "gpu_static"),
             "gpu_runtime": _verdict(art, "gpu_runtime"), "delegation": _delegation(art)}
            for art in report.artifacts if art.status != NOT_SHIPPED]


def parity_view(report: Report) -> dict:
    """What parity was measured against, or why it was not; the float64 comparison of each file that has one."""
    arts, budget = report.artifacts, report.evidence_budget
    measured = [(a, a.measured_parity) for a in arts if a.measured_parity is not None]
    fp64 = [{"file": a.file, "vs_fp64": f"{p.vs_reference_fp64.rel_l2_pooled:.3g}",
             "upstream_vs_fp64": f"{p.upstream_fp32_vs_fp64:.3g}", "ratio": f"{p.fp64_error_ratio:.3f}"}
            for a, p in measured if p.fp64_error_ratio is not None]
    return {"measured": len(measured), "total": len(arts), "reference": measured[0][1].reference if measured else None,
            "why_not": "; ".join(sorted({_verdict(a, "parity") for a in arts})),
            "fp64": fp64, "fp64_gate": report.gates.fp32.fp64_error_ratio, "evidence_line": budget.line,
            "parity_subset": budget.parity_images < budget.images}


def not_shipped_view(report: Report) -> dict:
    arts = report.artifacts
    return {"total": len(arts),
            "rows": [{"file": a.file, "target": a.target, **_parity_figures(a), "why": a.status_reason or "-"}
                     for a in arts if a.status == NOT_SHIPPED],
            "unverified": [{"file": a.file, "why": a.status_reason or "not checked"}
                           for a in arts if a.status == UNVERIFIED]}


def fp16_rows(report: Report) -> list[dict]:
    rows = []
    for art in report.artifacts:
        f = art.fp16_compute or Fp16Prediction()
        if art.verdict("fp16_compute") is not None:
            rows.append({"file": art.file, "verdict": _verdict(art, "fp16_compute"),
                         "rel_l2": fmt(f.rel_l2, ".3e"), "pearson": fmt(f.pearson, ".6f"),
                         "images": ", ".join(f.images) or "-", "first_bad_layer": fmt(f.first_bad_layer)})
    return rows


def fp16_arithmetic_rows(report: Report) -> list[dict]:
    """fp16 .pte files: judged on FP16 arithmetic, measured on this CPU or on the emulated ARMv8.2-A CPU
    (``--fp16-arm64``), or predicted (XNNPACK's f16 kernels as on ARM)."""
    rows = []
    for art in report.artifacts:
        found = art.fp16_arithmetic
        if found is not None and art.verdict("fp16_arithmetic") is not None:
            measured = found.emulated if isinstance(found.emulated, PredictionFigures) \
                and found.emulated != PredictionFigures() else None
            if found.arithmetic:
                figures = _parity_as_figures(art)
            else:
                figures = measured or (found.prediction.figures if found.prediction else PredictionFigures())
            cpu = found.cpu or "-"
            rows.append({"file": art.file, "verdict": _verdict(art, "fp16_arithmetic"), "evidence": found.evidence,
                         "cpu": f"emulated ARMv8.2-A on {cpu}" if measured else cpu,
                         "rel_l2": fmt(figures.rel_l2_pooled, ".3e"), "delta": fmt(figures.delta125_worst, ".4f")})
    return rows


def _parity_as_figures(art: Artifact) -> PredictionFigures:
    p = art.parity if isinstance(art.parity, Parity) else Parity()
    return PredictionFigures(p.rel_l2_pooled, p.delta125_worst)


def headroom_view(report: Report) -> dict | None:
    """The FP16 headroom seen on the verification images, per op kind (the first prediction that has it)."""
    for art in report.artifacts:
        found = (art.fp16_compute, art.fp16_arithmetic.prediction if art.fp16_arithmetic else None)
        prediction = next((p for p in found if p is not None and p.headroom_by_op), None)
        if prediction is not None:
            return {"rows": [{"op": r.op, "max_abs": fmt(r.max_abs, ".4g"), "headroom": fmt(r.headroom, ".3g")}
                             for r in prediction.headroom_by_op[:8]],
                    "images": ", ".join(prediction.images) or "-", "random": report.random_weights}
    return None


def units_view(report: Report) -> dict | None:
    """The output's units line and, when metres need the focal length, the formula with a worked example: a photo
    with a 60 degree horizontal field of view stretched to the input (focal_px = W / (2 tan 30 degrees)). None for
    reports without ``output_units``."""
    units = report.output_units
    if units is None:
        return None
    view = {"line": units.line, "to_metres": units.to_metres, "focal": None}
    focal = units.focal_reference_px
    if focal:
        _, _, h, w = report.input_shape
        focal_px = w / (2 * math.tan(math.radians(30)))
        view["focal"] = {"reference": f"{focal:g}", "w": w, "h": h, "focal_px": f"{focal_px:.1f}",
                         "value": "2.0", "metres": f"{2.0 * focal_px / focal:.2f}"}
    return view


def metres_errors(report: Report) -> list[dict]:
    """Each measured file's worst-image mean error against upstream in the output's unit (metric models only)."""
    label = report.output_units.label if report.output_units else None
    if not label:
        return []
    return [{"file": a.file, "mean_abs": f"{a.parity.mean_abs_worst:.3g}", "unit": label}
            for a in report.artifacts if isinstance(a.parity, Parity) and a.parity.mean_abs_worst is not None]


def ledger_rows(report: Report) -> list[dict]:
    return [{"rewrite": e.rewrite, "exact": e.exact, "rel_l2_step": fmt(e.rel_l2_step, ".2e"),
             "rel_l2_cumulative": fmt(e.rel_l2_cumulative, ".2e"), "summary": e.summary}
            for e in report.rewrite_ledger]


def ledger_at(report: Report) -> str:
    """Where the rewrite ledger was measured: 'the export shape', or '560x308 (...)' when the budget scaled it down."""
    hw, (_, _, h, w) = report.rewrite_ledger_hw, report.input_shape
    if not hw or tuple(hw) == (h, w):
        return "the export shape"
    return (f"{hw[0]}x{hw[1]}, the export shape ({h}x{w}) scaled down by the evidence budget "
            "(`--evidence-images all` measures it at the export shape)")


def base_model_line(report: Report) -> str:
    """The weights' Hub repo, then what it says it was fine-tuned from: "a/b, fine-tuned from c/d"."""
    chain = [c for c in report.base_model_chain or (report.base_model,) if c]
    return ", fine-tuned from ".join(chain) if chain else "-"


def context(data: dict) -> dict:
    """Everything card.md.j2 reads, from report.json's object."""
    report = load_report(data)
    detail, machine = report.weights_detail, report.machine
    _, _, h, w = report.input_shape
    arts = report.artifacts
    return {"front_matter": yaml.safe_dump(front_matter(report), sort_keys=False).strip(),
            "model": report.model, "h": h, "w": w, "random_weights": report.random_weights,
            "source": {"weights": report.weights, "format": detail.format, "revision": detail.revision or "-",
                       "licence": detail.licence, "licence_note": detail.licence_note,
                       "base_model": base_model_line(report), "pos_embed_formula": report.pos_embed_formula},
            "normalization": report.normalization or None, "output": report.output,
            "units": units_view(report), "metres_errors": metres_errors(report),
            "output_shape": list(arts[0].output_shape) if arts else "",
            "machine_name": f"{machine.cpu or 'this machine'} ({machine.cores or '?'} cores)",
            "os": machine.os or "", "bench_machine": machine_view(report), "variants": variants(report),
            "parity": parity_view(report), "not_shipped": not_shipped_view(report), "fp16": fp16_rows(report),
            "fp16_arithmetic": fp16_arithmetic_rows(report), "headroom": headroom_view(report),
            "ledger": ledger_rows(report), "ledger_at": ledger_at(report), "rewrites": list(report.rewrites),
            "snippets": snippets(report),
            "command": report.command, "versions": report.versions,
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
