"""The model card: README.md of an export folder, generated from report.json alone."""

from __future__ import annotations

from pathlib import Path

import yaml

from ..atomic import write_text
from .schema import NOT_SHIPPED, SHIPPED, read_report, verdict_of
from .snippets import snippets

HF_LICENSES = {"Apache-2.0": "apache-2.0", "CC-BY-NC-4.0": "cc-by-nc-4.0"}
TAGS_BY_SUFFIX = {"tflite": ["litert", "tflite"], "pte": ["executorch", "pte"], "onnx": ["onnx"]}
LIBRARY_BY_SUFFIX = {"tflite": "litert", "pte": "executorch", "onnx": "onnx"}


def _fmt(value, spec: str = ".4g", missing: str = "-") -> str:
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format(value, spec)
    return str(value)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


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


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _verdict(art: dict, check: str) -> str:
    v = verdict_of(art, check)
    return "-" if v is None else v.text()


def _latency(art: dict, bench: dict) -> str:
    lat = art.get("latency_ms") or {}
    if lat.get("median") is None:
        return lat.get("error") or art.get("parity_note") or "not measured"
    how = (f"median of {lat.get('rounds', '?')} rounds x {lat.get('iters', '?')} calls, {lat.get('threads')} "
           f"threads, {lat.get('runtime')}")
    short = ", short orientation run" if "orientation" in str(bench.get("note", "")) else ""
    return f"{lat['median']:.1f} ms ({how}{short})"


def _delegation(art: dict) -> str:
    d = art.get("delegation")
    if not d:
        return "-"
    total = (d.get("delegated") or 0) + (d.get("portable") or 0)
    share = f"{100 * d['delegated'] / total:.1f} %" if total else "-"
    return f"{d.get('delegated')}/{total} ops delegated ({share}), {d.get('subgraphs')} subgraph(s)"


def variants_table(report: dict, machine: str) -> str:
    """Every file written beside the card (shipped, or unverified with why)."""
    rows = []
    for art in report.get("artifacts", []):
        status = art.get("status", "unverified")
        if status == NOT_SHIPPED:
            continue
        p = art.get("parity") or {}
        label = status if status == SHIPPED else f"**UNVERIFIED**: {art.get('status_reason', '')}"
        rows.append([art["file"], art["target"], label, f"{art['bytes'] / 1e6:.1f} MB", _verdict(art, "parity"),
                     _fmt(p.get("pearson_worst"), ".6f"), _fmt(p.get("rel_l2_pooled"), ".3e"),
                     _fmt(p.get("delta125_worst"), ".4f"), _latency(art, report.get("bench") or {}),
                     _verdict(art, "gpu_static"), _verdict(art, "gpu_runtime"), _delegation(art)])
    if not rows:
        return "No file earned a slot."
    return _table(["file", "target", "status", "size", "parity gate", "Pearson (worst)", "rel. L2 (pooled)",
                   "δ<1.25 (worst)", f"latency on {machine}", "GPU check (static)", "GPU check (real accelerator)",
                   "ExecuTorch delegation"], rows)


def parity_statement(report: dict) -> str:
    """What parity was measured against, or that it was not measured (and why)."""
    measured = [a for a in report.get("artifacts", []) if "pearson_worst" in (a.get("parity") or {})]
    if not measured:
        reasons = sorted({_verdict(a, "parity") for a in report.get("artifacts", [])})
        return "Parity was **not measured** for these files (" + "; ".join(reasons) + ")."
    text = (f"Parity is against {measured[0]['parity'].get('reference')} on identical preprocessed inputs "
            f"({len(measured)} of {len(report['artifacts'])} file(s) measured).")
    for art in measured:
        p = art["parity"]
        if p.get("fp64_error_ratio") is not None:
            text += (f"\n\n**{art['file']}** is {p['vs_reference_fp64']['rel_l2_pooled']:.3g} from the upstream model "
                     f"computed in float64; upstream PyTorch's own float32 run is {p['upstream_fp32_vs_fp64']:.3g} "
                     f"from it. The file is {p['fp64_error_ratio']:.3f}x as far from exact as upstream PyTorch "
                     f"(gate: at most {report.get('gates', {}).get('fp32', {}).get('fp64_error_ratio', '-')}x).")
    return text


def not_shipped(report: dict) -> str:
    arts = report.get("artifacts", [])
    entries = [a for a in arts if a.get("status") == NOT_SHIPPED]
    unverified = [a for a in arts if a.get("status", "unverified") == "unverified"]
    if not entries:
        if unverified:
            return (f"None failed, but {len(unverified)} of {len(arts)} file(s) are **unverified**: "
                    + "; ".join(f"{a['file']}: {a.get('status_reason', 'not checked')}" for a in unverified))
        return "Every variant built passed every check that applies to it."
    rows = []
    for art in entries:
        p = art.get("parity") or {}
        rows.append([art["file"], art["target"], _fmt(p.get("pearson_worst"), ".6f"), _fmt(p.get("rel_l2_pooled"), ".3e"),
                     _fmt(p.get("delta125_worst"), ".4f"), art.get("status_reason", "-")])
    return _table(["file", "target", "Pearson (worst)", "rel. L2 (pooled)", "δ<1.25 (worst)", "why"], rows)


def fp16_section(report: dict) -> str:
    rows = []
    for art in report.get("artifacts", []):
        f = art.get("fp16_compute") or {}
        if verdict_of(art, "fp16_compute") is not None:
            rows.append([art["file"], _verdict(art, "fp16_compute"), _fmt(f.get("rel_l2"), ".3e"),
                         _fmt(f.get("pearson"), ".6f"), ", ".join(f.get("images", [])) or "-",
                         _fmt(f.get("first_bad_layer"))])
    if not rows:
        return "Not measured for these files."
    return ("Simulated FP16 compute on the CPU (what a mobile GPU does under its default precision policy); "
            "pass means FP16 compute stays within tolerance of FP32 on every image listed:\n\n"
            + _table(["file", "FP16 compute", "rel. L2 vs FP32", "Pearson vs FP32", "images", "first bad layer"], rows))


def ledger_section(report: dict) -> str:
    ledger = report.get("rewrite_ledger") or []
    if not ledger:
        return "Rewrites applied: " + ", ".join(report.get("rewrites", [])) + " (effect not measured)."
    rows = [[e["rewrite"], "exact" if e["exact"] else "approximation", _fmt(e["rel_l2_step"], ".2e"),
             _fmt(e["rel_l2_cumulative"], ".2e"), e["summary"]] for e in ledger]
    return ("Each rewrite applied in turn to the loaded model, measured on one natural image at the export shape "
            "(relative L2 of the output vs the step before, and vs the model before any rewrite):\n\n"
            + _table(["rewrite", "kind", "rel. L2 (step)", "rel. L2 (cumulative)", "what it does"], rows))


def render(report: dict) -> str:
    """The card's Markdown text."""
    machine = report.get("machine", {})
    machine_name = f"{machine.get('cpu', 'this machine')} ({machine.get('cores', '?')} cores)"
    detail = report.get("weights_detail", {})
    _, _, h, w = report["input_shape"]
    parts = ["---\n" + yaml.safe_dump(front_matter(report), sort_keys=False).strip() + "\n---", ""]
    parts.append(f"# {report['model']}: on-device depth estimation ({h}x{w})\n")
    if report.get("random_weights"):
        parts.append("> **RANDOM WEIGHTS — NOT A USABLE MODEL.** These files were exported from seeded random "
                     "weights for a dry run. Their depth maps mean nothing; every figure below only shows that the "
                     "files reproduce the PyTorch model they came from.\n")
    parts += [
        "## Source\n",
        _table(["", ""], [["weights", report.get("weights")], ["format", detail.get("format")],
                          ["revision", detail.get("revision") or "-"], ["weights licence", detail.get("licence")],
                          ["base model", report.get("base_model") or "-"],
                          ["position-embedding resampling", report.get("pos_embed_formula")]]),
        "\n## Input and output\n",
        _table(["", ""], [["input", f"`args_0` float32 [1, 3, {h}, {w}], NCHW, RGB"],
                          ["normalisation", report.get("normalization")],
                          ["resize", f"stretch (or upper-bound resize and crop) to {h}x{w}; letterboxing costs accuracy"],
                          ["output", f"`output_0` float32 {report['artifacts'][0]['output_shape'] if report.get('artifacts') else ''}"
                                     f": {report.get('output')}"]]),
        "\n## Variants\n",
        variants_table(report, machine_name),
        "\n" + parity_statement(report) + "\n",
        "## Builds that did not earn a slot\n",
        not_shipped(report),
        "\n## GPU precision (FP16 risk)\n",
        fp16_section(report),
        "\n## Graph rewrites\n",
        ledger_section(report),
        "\n## Use it\n",
    ]
    for title, code in snippets(report):
        parts += [f"### {title}\n", code, ""]
    versions = ", ".join(f"{k} {v}" for k, v in report.get("versions", {}).items())
    parts += ["## Reproduce\n", f"```sh\n{report.get('command') or 'depthport export ...'}\n```\n",
              f"Versions: {versions}.\n", f"Measured on: {machine_name}, {machine.get('os', '')}.\n"]
    return "\n".join(parts)


def write_card(out_dir: str | Path) -> Path:
    """Regenerate out_dir/README.md from out_dir/report.json (validated against the schema)."""
    out_dir = Path(out_dir)
    card = out_dir / "README.md"
    write_text(card, render(read_report(out_dir / "report.json")))
    return card
