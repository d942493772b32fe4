"""Parity thresholds per precision, and the shipping rule: a file that fails a required check, or could not be checked,
is moved out of the shipped set.

Thresholds apply to the parity summary against the upstream reference. Lower bounds: pearson_*, delta125_*; upper
bounds: rel_l2_pooled, max_abs, fp64_error_ratio (the file's error against the upstream model in float64 divided by
upstream float32's own error against float64: FP32 files must be no worse than 2x upstream PyTorch itself,
``FP64_RATIO_GATE``). FP16 files are gated like INT8 ones, in the depth map's own terms: worst delta<1.25 (>= 0.99,
as INT8) and pooled rel. L2 (<= 1e-2, the FP16-compute prediction's tolerance) besides Pearson; an fp16 .pte also on
FP16 arithmetic, measured or predicted (``fp16_arithmetic_verdict``). Override with a dict ``{"fp16":
{"pearson_worst": 0.9995}}`` or with strings ``"fp16.pearson=0.9995"`` (short names: pearson, rel_l2, delta125,
max_abs, mean_abs, fp64_ratio).

Metric models (output in metres, or in metres once scaled by the focal length) are also gated in the output's own
unit: the worst image's mean absolute error (``mean_abs_worst``), at most ``METRIC_DEFAULTS`` metres per precision
(for canonical depth: metres at the reference focal length), besides the relative gates.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from ..core.report_model import NotMeasured, Parity, Units, load
from ..core.schema import (ERROR, FAIL, NOT_MEASURED, NOT_SHIPPED, PASS, SKIPPED, ArtifactJson, Fp16ArithmeticJson,
                           Fp16PredictionJson, ParityJson, ReportJson, Verdict)
from ..errors import InputError
from ..outdir import NOT_SHIPPED_DIR

# The float64 gate, set from data (benchmarks/fp32_gate.py, README "The float64 floor"): correct FP32 files measured
# 1.01-1.06x on AVX2 (AMD Zen 3), up to 1.27x on AVX-512 without FP16 (AMD Zen 5) and up to 1.63x on Sapphire
# Rapids, whose kernels accumulate differently from upstream PyTorch's; output-visible planted defects measured
# 145x and more. 2x passes the first with margin and refuses the second.
FP64_RATIO_GATE = 2.0
DEFAULTS: dict[str, dict[str, float]] = {
    "fp32": {"pearson_worst": 0.9999, "rel_l2_pooled": 1e-4, "fp64_error_ratio": FP64_RATIO_GATE},
    "fp16": {"pearson_worst": 0.999, "delta125_worst": 0.99, "rel_l2_pooled": 1e-2},
    "int8": {"delta125_worst": 0.99},
}
# Metric models: worst-image mean absolute error in metres. 1 % of an 80 m range is 0.8 m, so the relative gates
# alone would let metre-sized errors through.
METRIC_DEFAULTS: dict[str, dict[str, float]] = {
    "fp32": {"mean_abs_worst": 0.001},
    "fp16": {"mean_abs_worst": 0.05},
    "int8": {"mean_abs_worst": 0.5},
}
LOWER = ("pearson_worst", "pearson_median", "delta125_worst", "delta125_median")
UPPER = ("rel_l2_pooled", "max_abs", "mean_abs_worst", "mean_abs_median", "fp64_error_ratio")
ALIASES = {"pearson": "pearson_worst", "corr": "pearson_worst", "rel_l2": "rel_l2_pooled",
           "delta125": "delta125_worst", "delta": "delta125_worst", "fp64_ratio": "fp64_error_ratio",
           "mean_abs": "mean_abs_worst", "mae": "mean_abs_worst"}
PRECISIONS = ("fp32", "fp16", "int8")


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
    if precision.strip().lower() not in PRECISIONS:
        raise InputError(f"unknown precision {precision.strip()!r} in gate {text!r}; known: {', '.join(PRECISIONS)}")
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"malformed gate value in {text!r}: not a number") from None
    return precision.lower(), metric_name(metric), number


def thresholds(overrides: dict | list[str] | None = None, metric: bool = False) -> dict[str, dict[str, float]]:
    """The defaults (with ``metric``, also the gates in metres) with ``overrides`` applied (nested dict, flat
    {'fp32.pearson': v} dict, or strings)."""
    out = copy.deepcopy(DEFAULTS)
    if metric:
        for precision, limits in METRIC_DEFAULTS.items():
            out[precision].update(limits)
    if not overrides:
        return out
    items: list[tuple[str, str, float]] = []
    if isinstance(overrides, dict):
        for key, value in overrides.items():
            if isinstance(value, dict):
                if key.lower() not in PRECISIONS:
                    raise InputError(f"unknown precision {key!r} in gates; known: {', '.join(PRECISIONS)}")
                items += [(key.lower(), metric_name(m), float(v)) for m, v in value.items()]
            else:
                items.append(parse_gate(f"{key}={value}"))
    else:
        items = [parse_gate(text) for text in overrides]
    for precision, metric, value in items:
        _check_value(precision, metric, value)
        out.setdefault(precision, {})[metric] = value
    return out


def _check_value(precision: str, metric: str, value: float) -> None:
    """A gate no figure could pass (a correlation above 1, a share of pixels above 1, an error below 0, NaN) is an
    InputError: the file would fail whatever it computes."""
    low, high, what = ((-1.0, 1.0, "a correlation, from -1 to 1") if metric.startswith("pearson") else
                       (0.0, 1.0, "a share of the pixels, from 0 to 1") if metric.startswith("delta125") else
                       (0.0, float("inf"), "an error, 0 or more"))
    if not low <= value <= high:
        raise InputError(f"gate {precision}.{metric}={value:g} can never pass: it is {what}")


def loosened(overrides: dict | list[str] | None, metric: bool = False) -> list[str]:
    """The gates ``overrides`` set looser than the defaults ('fp32.pearson_worst 0.1 (default 0.9999)'): a file
    that passes them may fail the defaults, which a console line says."""
    given, default = thresholds(overrides, metric), thresholds(None, metric)
    return [f"{precision}.{name} {value:g} (default {default[precision][name]:g})"
            for precision, limits in given.items() for name, value in limits.items()
            if name in default.get(precision, {}) and
            (value < default[precision][name] if name in LOWER else value > default[precision][name])]


def evaluate(parity: Parity | NotMeasured | dict | None, precision: str | None, gates: dict[str, dict[str, float]],
             unit: str = "") -> dict:
    """The parity verdict (``Verdict.to_dict()``) of one file; ``unit`` names the output's unit in the reasons
    of the gates stated in it (mean_abs_*, max_abs). ``parity``: the figures, typed or as report.json holds them.

    Not measured when there are no figures (``parity`` None or empty, or ``NotMeasured``: its ``cause``), when
    no thresholds exist for ``precision``, or when a thresholded figure is missing (the float64 comparison
    switched off: ``Parity.skipped`` lists what was skipped on request).
    """
    if isinstance(parity, dict):
        parity = load(Parity | NotMeasured, parity) if parity else None
    limits = gates.get((precision or "").lower()) or {}
    if not isinstance(parity, Parity):
        why, cause = (parity.reason, parity.cause) if parity is not None else ("no parity figures", None)
        return Verdict.not_measured(why, cause or ERROR, limits).to_dict()
    if not limits:
        why = (f"no thresholds for precision {precision!r}" if precision
               else "no precision known for this file (give --precision fp32|fp16|int8)")
        return Verdict.not_measured(why, ERROR).to_dict()
    figures = {m: getattr(parity, m, None) for m in limits}
    # the evidence budget's subsets: of the float64 reference, and of parity itself
    subset = parity.fp64_images if "fp64_error_ratio" in limits else None
    images = parity.parity_images
    failed, missing = [], []
    for metric, limit in limits.items():
        value = figures[metric]
        on = subset if subset and metric == "fp64_error_ratio" else images
        on = f" ({on})" if on else ""
        if value is None:
            missing.append(metric)
        elif metric in LOWER and not value >= limit:
            failed.append(f"{metric} {value:.6g} < {limit:g}{on}")
        elif metric in UPPER and not value <= limit:
            u = f" {unit}" if unit and "abs" in metric else ""
            failed.append(f"{metric} {value:.4g}{u} > {limit:g}{u}{on}")
    if failed:
        return Verdict.failed(failed, figures, limits).to_dict()
    if missing:
        skipped = [m for m in missing if m in parity.skipped]
        cause = SKIPPED if len(skipped) == len(missing) else ERROR
        return Verdict.not_measured(f"{', '.join(missing)} not measured", cause, limits).to_dict()
    notes = [images or "", f"fp64_error_ratio: {subset}" if subset else ""]
    return Verdict.passed(figures, limits, "; ".join(n for n in notes if n)).to_dict()


def fp16_arithmetic_verdict(art: dict | ArtifactJson, gates: dict[str, dict[str, float]], unit: str = "") -> Verdict:
    """The FP16 gate for devices that compute in FP16 (an fp16 .pte on an ARMv8.2 phone): the measured parity
    where the verifying CPU computes in FP16, else the measurement on the emulated ARMv8.2-A CPU when there is one
    (``verify.fp16_emulated``), else the prediction of XNNPACK's f16 kernels as ARM runs them. A storage-only
    measurement is never taken as this evidence. An x86 CPU with FP16 arithmetic keeps the FP16 subnormals that ARM
    flushes: its measurement and the ARM prediction must both pass."""
    art = ArtifactJson(art)
    found = Fp16ArithmeticJson(art.fp16_arithmetic)
    emulated = load(Parity | NotMeasured, found.emulated) if found.emulated else None
    prediction = Fp16PredictionJson(found.prediction) if found.prediction is not None else None
    if found.arithmetic:
        verdict = _located(art.verdict("parity"), f"measured on FP16 arithmetic ({found.reason})")
        if prediction is None or verdict.state == NOT_MEASURED:
            return verdict
        return _worse(verdict, _predicted(prediction, gates, unit, "subnormals kept here, flushed on ARM"))
    if isinstance(emulated, Parity):
        return _located(Verdict.from_dict(evaluate(emulated, "fp16", gates, unit)),
                        f"measured on FP16 arithmetic, emulated: {emulated.compute_reason}")
    emulation = f"; emulation not measured: {emulated.reason}" if emulated else ""
    if prediction is None:
        return Verdict.not_measured(f"{found.reason}; the FP16 prediction is switched off (fp16_sim)"
                                    + emulation, SKIPPED)
    return _predicted(prediction, gates, unit, f"not measured: {found.reason}", emulation)


def _predicted(prediction: Fp16PredictionJson, gates: dict, unit: str, why: str, tail: str = "") -> Verdict:
    if prediction.error is not None:
        return Verdict.not_measured(f"XNNPACK FP16 prediction failed: {prediction.error}")
    verdict = Verdict.from_dict(evaluate(prediction.figures, "fp16", gates, unit))
    subset = f"; {prediction.subset}" if prediction.subset else ""
    how = ("XNNPACK f16 kernels as on ARM, subnormals flushed" if prediction.accumulate == "xnnpack-arm"
           else "XNNPACK f16 kernels")
    return _located(verdict, f"predicted ({how}, simulated), {why}{subset}{tail}")


def _located(verdict: Verdict, where: str) -> Verdict:
    """The verdict with where its evidence comes from appended to its reasons (a not-measured one unchanged)."""
    if verdict.state == NOT_MEASURED:
        return verdict
    return Verdict(verdict.state, (*verdict.reasons, where), verdict.figures, verdict.thresholds)


def _worse(a: Verdict, b: Verdict) -> Verdict:
    """Two verdicts that must both pass, as one: fail if either fails, else not measured if either is, else pass;
    the reasons of both, the figures of the first (the second's under "predicted")."""
    rank = {FAIL: 0, NOT_MEASURED: 1, PASS: 2}
    state = min(a.state, b.state, key=rank.get)
    cause = next((v.cause for v in (a, b) if v.state == NOT_MEASURED), None) if state == NOT_MEASURED else None
    figures = {**a.figures, "predicted": b.figures} if b.figures else a.figures
    return Verdict(state, (*a.reasons, *b.reasons), figures, a.thresholds or b.thresholds, cause)


def unit_label(units: Units | dict | None) -> str:
    """'m', 'm at focal 300 px' (canonical depth) or '' (no unit), from report.json ``output_units``."""
    if isinstance(units, dict):
        units = load(Units, units)
    return units.label or "" if units is not None else ""


def apply_gates(report: dict | ReportJson, out_dir: Path | None, gates: dict[str, dict[str, float]],
                files: dict | None = None) -> None:
    """Judge every artifact: its parity verdict joins its other checks, and its status follows from the
    required ones (``schema.file_status``). In an export (``out_dir``) the files that do not ship move into
    ``out_dir/not-shipped/`` and are listed in the report; an artifact's ``file`` stays its path relative to
    ``out_dir``. With ``out_dir`` None (``depthport verify`` of the user's files) nothing moves."""
    report = ReportJson(report)
    report.gates = gates
    unit = unit_label(report.output_units)
    for art in report.artifacts:
        parity = load(Parity | NotMeasured, art.parity) if art.parity else None
        verdict = Verdict.from_dict(evaluate(parity, art.precision, gates, unit))
        compute = parity.compute if isinstance(parity, Parity) else None
        if compute and verdict.state != NOT_MEASURED:
            verdict = Verdict(verdict.state, (*verdict.reasons, f"measured with {compute}"), verdict.figures,
                              verdict.thresholds)
        art.set_check("parity", verdict, required=True)
        if art.fp16_arithmetic is not None:
            art.set_check("fp16_arithmetic", fp16_arithmetic_verdict(art, gates, unit), required=True)
    settle(report, Path(out_dir) if out_dir is not None else None, files)


def settle(report: dict | ReportJson, out_dir: Path | None, files: dict | None = None) -> None:
    """Set each artifact's status from its checks and, in an export (``out_dir``), move the files that do not
    ship into not-shipped/."""
    report = ReportJson(report)
    if out_dir is not None:
        report.not_shipped = []
    for art in report.artifacts:
        if art.settle() != NOT_SHIPPED or out_dir is None:
            continue
        src = out_dir / art.file
        name = Path(art.file).name
        parked = out_dir / NOT_SHIPPED_DIR / name
        parked.parent.mkdir(exist_ok=True)
        if src != parked and src.exists():
            os.replace(src, parked)
        art.file = f"{NOT_SHIPPED_DIR}/{name}"
        for key, value in (files or {}).items():
            if Path(value) == src:
                files[key] = parked
        report.not_shipped.append({
            "file": art.file, "target": art.target, "precision": art.precision,
            "reasons": [art.status_reason], "parity": ParityJson(art.parity).summary() if art.parity else {},
            "note": "did not earn a slot: " + art.status_reason,
        })
