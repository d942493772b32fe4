"""Pass/fail thresholds per precision; a variant that fails is moved out of the shipped set.

Thresholds apply to the parity summary against the upstream reference. Lower bounds: pearson_*,
delta125_*; upper bounds: rel_l2_pooled, max_abs. Override with a dict ``{"fp16": {"pearson_worst": 0.9995}}``
or with strings ``"fp16.pearson=0.9995"`` (short names: pearson, rel_l2, delta125, max_abs).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from ..preprocess import InputError

DEFAULTS: dict[str, dict[str, float]] = {
    "fp32": {"pearson_worst": 0.9999, "rel_l2_pooled": 1e-4},
    "fp16": {"pearson_worst": 0.999},
    "int8": {"delta125_worst": 0.99},
}
LOWER = ("pearson_worst", "pearson_median", "delta125_worst", "delta125_median")
UPPER = ("rel_l2_pooled", "max_abs")
ALIASES = {"pearson": "pearson_worst", "corr": "pearson_worst", "rel_l2": "rel_l2_pooled",
           "delta125": "delta125_worst", "delta": "delta125_worst"}
NOT_SHIPPED_DIR = "not-shipped"


def metric_name(name: str) -> str:
    name = ALIASES.get(name.strip(), name.strip())
    if name not in LOWER + UPPER:
        raise InputError(f"unknown gate metric {name!r}; known: {', '.join(LOWER + UPPER + tuple(ALIASES))}")
    return name


def parse_gate(text: str) -> tuple[str, str, float]:
    """'fp32.pearson=0.9999' -> ('fp32', 'pearson_worst', 0.9999)."""
    key, sep, value = text.partition("=")
    precision, dot, metric = key.strip().partition(".")
    if not (sep and dot and precision and metric):
        raise InputError(f"malformed gate {text!r}: expected PRECISION.METRIC=VALUE, e.g. fp32.pearson=0.9999")
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"malformed gate value in {text!r}: not a number") from None
    return precision.lower(), metric_name(metric), number


def thresholds(overrides: dict | list[str] | None = None) -> dict[str, dict[str, float]]:
    """The defaults with ``overrides`` applied (nested dict, flat {'fp32.pearson': v} dict, or strings)."""
    out = copy.deepcopy(DEFAULTS)
    if not overrides:
        return out
    items: list[tuple[str, str, float]] = []
    if isinstance(overrides, dict):
        for key, value in overrides.items():
            if isinstance(value, dict):
                items += [(key.lower(), metric_name(m), float(v)) for m, v in value.items()]
            else:
                items.append(parse_gate(f"{key}={value}"))
    else:
        items = [parse_gate(text) for text in overrides]
    for precision, metric, value in items:
        out.setdefault(precision, {})[metric] = value
    return out


def evaluate(parity: dict | None, precision: str | None, gates: dict[str, dict[str, float]]) -> dict:
    """{"passed": True | False | None, "reasons": [...], "thresholds": {...}}; None = could not be judged."""
    limits = gates.get((precision or "").lower())
    if not parity or "error" in parity:
        why = (parity or {}).get("error", "no parity figures")
        return {"passed": None, "reasons": [f"not verified: {why}"], "thresholds": limits or {}}
    if not limits:
        return {"passed": None, "reasons": [f"no thresholds for precision {precision!r}"], "thresholds": {}}
    reasons = []
    for metric, limit in limits.items():
        value = parity[metric]
        if metric in LOWER and not value >= limit:
            reasons.append(f"{metric} {value:.6g} < {limit:g}")
        elif metric in UPPER and not value <= limit:
            reasons.append(f"{metric} {value:.4g} > {limit:g}")
    return {"passed": not reasons, "reasons": reasons, "thresholds": limits}


def summary_figures(parity: dict) -> dict:
    return {k: v for k, v in parity.items() if k != "per_image" and not k.startswith("vs_")}


def apply_gates(report: dict, out_dir: Path, gates: dict[str, dict[str, float]], cache: dict | None = None) -> None:
    """Judge every artifact; move failing files into ``out_dir/not-shipped/`` and list them in the report.

    An artifact's ``file`` stays its path relative to ``out_dir``. Verdicts of None (not judged) ship.
    """
    out_dir = Path(out_dir)
    report["gates"] = gates
    report["not_shipped"] = []
    for art in report["artifacts"]:
        verdict = evaluate(art.get("parity"), art.get("precision"), gates)
        art["gate"] = verdict
        art["shipped"] = verdict["passed"] is not False
        src = out_dir / art["file"]
        name = Path(art["file"]).name
        parked = out_dir / NOT_SHIPPED_DIR / name
        if art["shipped"]:
            if parked.exists() and parked != src:
                parked.unlink()
            continue
        parked.parent.mkdir(exist_ok=True)
        if src != parked:
            os.replace(src, parked)
        art["file"] = f"{NOT_SHIPPED_DIR}/{name}"
        if cache is not None:
            for key, value in list(cache.items()):
                if isinstance(value, (str, Path)) and Path(value) == src:
                    cache[key] = parked
        report["not_shipped"].append({
            "file": art["file"], "target": art["target"], "precision": art.get("precision"),
            "reasons": verdict["reasons"], "parity": summary_figures(art["parity"]),
            "note": "did not earn a slot: failed its precision's parity gate",
        })
