"""The model card: README.md of an export folder, generated from report.json alone."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ..atomic import write_text
from .snippets import snippets

HF_LICENSES = {"Apache-2.0": "apache-2.0", "CC-BY-NC-4.0": "cc-by-nc-4.0"}
TAGS_BY_SUFFIX = {"tflite": ["litert", "tflite"], "pte": ["executorch", "pte"], "onnx": ["onnx"]}


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
    if report.get("base_model"):
        meta["base_model"] = report["base_model"]
    return meta


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _gpu(art: dict) -> str:
    check = art.get("gpu_check")
    if not check:
        return "n/a"
    verdict = "clean" if check.get("gpu_clean") else f"NOT clean ({len(check.get('violations', []))} issues)"
    runtime = check.get("runtime") or {}
    if runtime.get("fully_delegated") is not None:
        verdict += ", fully delegated on the accelerator" if runtime["fully_delegated"] else ", NOT fully delegated"
    return verdict


def _delegation(art: dict) -> str:
    d = art.get("delegation")
    if not d:
        return "-"
    total = (d.get("delegated") or 0) + (d.get("portable") or 0)
    share = f"{100 * d['delegated'] / total:.1f} %" if total else "-"
    return f"{d.get('delegated')}/{total} ops delegated ({share}), {d.get('subgraphs')} subgraph(s)"


def variants_table(report: dict, machine: str) -> str:
    rows = []
    for art in report.get("artifacts", []):
        if art.get("shipped") is False:
            continue
        p = art.get("parity") or {}
        lat = art.get("latency_ms") or {}
        latency = (f"{lat['median']:.1f} ms ({lat.get('runtime')}, {lat.get('threads')} threads)"
                   if lat.get("median") is not None else art.get("parity_note", "-"))
        rows.append([art["file"], art["target"], f"{art['bytes'] / 1e6:.1f} MB", _fmt(p.get("pearson_worst"), ".6f"),
                     _fmt(p.get("rel_l2_pooled"), ".3e"), _fmt(p.get("delta125_worst"), ".4f"), latency, _gpu(art),
                     _delegation(art)])
    return _table(["file", "target", "size", "Pearson (worst)", "rel. L2 (pooled)", "δ<1.25 (worst)",
                   f"latency on {machine}", "GPU check", "ExecuTorch delegation"], rows)


def not_shipped(report: dict) -> str:
    entries = [a for a in report.get("artifacts", []) if a.get("shipped") is False]
    if not entries:
        return "Every variant built passed its gates."
    rows = []
    for art in entries:
        p = art.get("parity") or {}
        reasons = "; ".join((art.get("gate") or {}).get("reasons", [])) or art.get("gpu_reason", "-")
        rows.append([art["file"], art["target"], _fmt(p.get("pearson_worst"), ".6f"), _fmt(p.get("rel_l2_pooled"), ".3e"),
                     _fmt(p.get("delta125_worst"), ".4f"), reasons])
    return _table(["file", "target", "Pearson (worst)", "rel. L2 (pooled)", "δ<1.25 (worst)", "why"], rows)


def fp16_section(report: dict) -> str:
    rows = []
    for art in report.get("artifacts", []):
        f = art.get("fp16_compute")
        if f:
            rows.append([art["file"], _fmt(f.get("rel_l2"), ".3e"), _fmt(f.get("pearson"), ".6f"),
                         _fmt(f.get("first_bad_layer")), _fmt(f.get("needs_enforce_f32"))])
    if not rows:
        return "Not measured for these files."
    return ("Simulated FP16 compute on the CPU (what a mobile GPU does under its default precision policy):\n\n"
            + _table(["file", "rel. L2 vs FP32", "Pearson vs FP32", "first bad layer", "needs enforce_f32"], rows))


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
        "\nParity is against the upstream PyTorch reference"
        + (f" ({report['artifacts'][0].get('parity', {}).get('reference')})" if report.get("artifacts") and
           report["artifacts"][0].get("parity") else "") + " on identical preprocessed inputs.\n",
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
    """Regenerate out_dir/README.md from out_dir/report.json."""
    from ..preprocess import InputError

    out_dir = Path(out_dir)
    path = out_dir / "report.json"
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"no report.json in {out_dir}: run `depthport export` first") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from None
    card = out_dir / "README.md"
    write_text(card, render(report))
    return card
