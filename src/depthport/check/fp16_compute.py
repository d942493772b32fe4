"""The FP16-compute prediction of an export (what a GPU computing in FP16 does to the model) and its verdict."""

from __future__ import annotations

import copy
import json
from typing import Callable

import torch

from ..core.machine import fp16_arithmetic
from ..core.report_model import Fp16Prediction, load
from ..core.schema import SKIPPED, Fp16ArithmeticJson, Fp16PredictionJson, Verdict, failed_section
from ..errors import error_text
from ..fp16.safe import fp16_safe_norm
from ..fp16.simulate import XNNPACK_MODES, simulate_fp16
from ..runtimes import fp16_sentinel

SUMMARY_KEYS = ("rel_l2", "pearson", "overflow_layers", "first_bad_layer", "needs_enforce_f32")
# Metric outputs: FP16 compute is also wrong when the worst image's mean error exceeds this, in the output's
# unit (metres; for canonical depth, metres at the reference focal length). The FP16 parity gate's value.
METRIC_TOLERANCE_M = 0.05


def predict_fp16(model: torch.nn.Module, input_hw: tuple[int, int], normalize: bool = True,
                 accumulate: str = "fp16", images: list | None = None, unit: str = "", on_layer=None,
                 target: str = "xnnpack-fp16", prompts: dict | None = None, cache=None, cache_id: tuple = (),
                 subset: str = "", fp32_outputs: dict | None = None) -> dict:
    """FP16-compute prediction over ``images`` ([(name, PIL image)], default the built-in chelsea); when it
    says FP32 must be enforced, also the prediction with the ``fp16_safe_norm`` rewrite applied ("xnnpack":
    of the ``xnnpack-fp16`` target's form, ``xnnpack_fp16_form``, which pre-scales its norms). With a ``unit``
    (a metric output: "m", or "m at focal 300 px"), FP16 is also judged by its mean error in that unit. ``target``
    names the fp16 .pte target whose form "xnnpack" simulates. ``prompts`` ({image name: (1, 1, h, w)}) feed a
    prompted model. ``on_layer(done, total)`` follows the layers of every run (``simulate_fp16``'s). With a
    ``cache`` (``core.evidence_cache.EvidenceCache``) and ``cache_id`` (what identifies ``model``: its id, weights
    digest and rewrites), the prediction is read from the cache when it holds it, else computed and kept there.
    ``subset`` ('FP16-compute prediction on 2 of 6 images (evidence budget)') says that ``images`` are a subset.
    ``fp32_outputs`` (a dict; not for the "xnnpack" modes, which run another form of the model) receives ``model``'s
    own FP32 output (H, W) per image name when the prediction is computed: the same run as an eager one, kept for
    verify."""
    import skimage.data
    from PIL import Image

    from ..preprocess import to_tensor

    images = images or [("chelsea", Image.fromarray(skimage.data.chelsea()))]
    x = [torch.from_numpy(to_tensor(img, input_hw, normalize=normalize)) for _, img in images]
    if prompts:
        x = [(image, torch.from_numpy(prompts[name])) for image, (name, _) in zip(x, images)]
    key = entry = None
    if cache is not None and cache_id:
        arrays = [a.numpy() for item in x for a in (item if isinstance(item, tuple) else (item,))]
        key = cache.key("fp16-prediction", *cache_id, accumulate, target if accumulate in XNNPACK_MODES else "",
                        unit, [name for name, _ in images], arrays=arrays)
        entry = cache.get_value(key)
    if entry is None:
        keep = [] if fp32_outputs is not None and accumulate not in XNNPACK_MODES else None
        entry = _prediction(model, x, [name for name, _ in images], accumulate, unit, on_layer, target, keep)
        for (name, _), out in zip(images, keep or []):
            fp32_outputs[name] = out.reshape(input_hw)
        if key is not None:
            cache.put_value(key, entry)
    return {**entry, **({"subset": subset} if subset else {})}


def _prediction(model, x: list, names: list[str], accumulate: str, unit: str, on_layer, target: str,
                keep: list | None = None) -> dict:
    """``predict_fp16``'s entry, computed, as report.json keeps it (plain JSON values); the FP32 outputs appended to
    ``keep``."""
    if accumulate in XNNPACK_MODES:  # XNNPACK's kernels run the xnnpack-fp16 file's form
        model = xnnpack_fp16_form(model, target=target)
    prediction = simulate_fp16(model, x, accumulate=accumulate, on_layer=on_layer)
    if keep is not None:
        keep += prediction.fp32_outputs
    entry = Fp16PredictionJson(prediction.as_entry())
    entry.images = names
    if unit:
        entry.update(unit=unit, tolerance_m=METRIC_TOLERANCE_M)
        if not entry.mean_abs_worst <= METRIC_TOLERANCE_M:
            entry.needs_enforce_f32 = True
    if entry.needs_enforce_f32 and accumulate not in XNNPACK_MODES:  # the xnnpack forms pre-scale their norms
        fixed = copy.deepcopy(model)
        try:
            fp16_safe_norm(fixed)
        except ValueError as exc:
            entry.with_fp16_safe_norm = failed_section(str(exc), None)
        else:
            after = simulate_fp16(fixed, x, accumulate=accumulate).as_entry()
            entry.with_fp16_safe_norm = {k: after[k] for k in SUMMARY_KEYS}
    return json.loads(json.dumps(entry.data, default=str))


def xnnpack_fp16_form(model: torch.nn.Module, split_k: int | None = None,
                      target: str = "xnnpack-fp16") -> torch.nn.Module:
    """The model in the form the fp16 .pte ``target`` lowers (pre-scaled norms, sigmoid GELU; for
    ``xnnpack-fp16-split`` short reductions), in FP32: what the XNNPACK prediction simulates. ``split_k`` overrides
    the target's chunk (0: none)."""
    from ..export.executorch import FORMS, backend_form

    form = {**FORMS[target], "fp16_io": False}
    if split_k is not None:
        form["split_k"] = split_k
    return backend_form(model, **form)[0]


def fp16_arithmetic_here(machine: dict | None = None) -> dict:
    """``core.machine.fp16_arithmetic`` (read from the CPU flags), checked on this machine against what its
    ExecuTorch does (``runtimes.fp16_sentinel``): where the two disagree, the runtime decides. ``sentinel`` says
    what the sentinel gave, or why it was not run."""
    found = fp16_arithmetic(machine)
    if machine is not None:
        return found
    try:
        total = fp16_sentinel.host_total()
    except (ImportError, RuntimeError, OSError, ValueError) as exc:
        return {**found, "sentinel": f"not measured: {error_text(exc)}"}
    says, seen = fp16_sentinel.accumulates_in_fp16(total), fp16_sentinel.describe(total)
    reason = Fp16ArithmeticJson(found).reason
    if Fp16ArithmeticJson(found).arithmetic is not says:
        reason = f"{reason}; but the runtime disagrees, and decides"
        found = {**found, "arithmetic": says, "mode": "fp16 arithmetic" if says else "fp16 storage only",
                 "reason": reason}
    return {**found, "sentinel": seen, "reason": f"{reason}; {seen}"}


# The FP16 arithmetic an fp16 .pte is judged for where it is not measured: XNNPACK's f16 kernels as an ARM phone runs
# them, FP16 subnormals flushed to zero (``fp16.simulate``).
PHONE_ACCUMULATE = "xnnpack-arm"


# Images the ARM prediction runs on where the file itself is measured on FP16 arithmetic over every image: there it
# adds only what flushing subnormals changes, at several times a GPU prediction's cost (one FP16 multiply-add per
# product); its subset is said in the prediction (``subset``) and the verdict's reason.
BESIDE_MEASURED_IMAGES = 1


def fp16_arithmetic_entry(predict: Callable[[int | None], dict | None], machine: dict | None = None) -> dict:
    """What verifies an fp16 .pte for devices that compute in FP16: the measured parity where this CPU computes
    in FP16 arithmetic (``fp16_arithmetic_here``), else ``predict(None)``, the prediction of XNNPACK's f16 kernels
    as on ARM (``PHONE_ACCUMULATE``; None when switched off) on the evidence budget's images. An x86 CPU with FP16
    arithmetic keeps FP16 subnormals, which ARM flushes: there the prediction is made too, on
    ``BESIDE_MEASURED_IMAGES`` image(s) (``predict(n)``), and both judge the file."""
    found = Fp16ArithmeticJson(fp16_arithmetic_here(machine))
    keeps = found.arithmetic and found.subnormals == "kept"
    evidence = ("measured, and predicted with subnormals flushed as on ARM" if keeps
                else "measured" if found.arithmetic else "predicted")
    entry = Fp16ArithmeticJson({**found.data})
    entry.evidence = evidence
    if not found.arithmetic or keeps:
        entry.prediction = predict(BESIDE_MEASURED_IMAGES if keeps else None)
    return entry.data


def fp16_verdict(prediction: dict | None) -> Verdict:
    """Pass when FP16 compute on the GPU is predicted to stay within tolerance of FP32 on every input."""
    if prediction is None:
        return Verdict.not_measured("FP16-compute prediction switched off (fp16_sim)", SKIPPED)
    p = Fp16PredictionJson(prediction)
    if p.error is not None:
        return Verdict.not_measured(f"FP16-compute prediction failed: {p.error}")
    figures = {"rel_l2": p.rel_l2, "pearson": p.pearson, "max_abs_fp32": p.max_abs_fp32, "inputs": p.inputs}
    limits = {"rel_l2": p.tolerance}
    unit, in_unit = p.unit, ""
    if unit:
        tol_m = p.tolerance_m
        figures["mean_abs_worst"], limits["mean_abs_worst"] = p.mean_abs_worst, tol_m
        in_unit = f" and {tol_m:g} {unit} mean error"
    if p.needs_enforce_f32:
        if p.overflow_layers:
            first = ", ".join(f"{e.layer} ({e.op})" for e in load(Fp16Prediction, p.data).overflow_ops[:3])
            why = f"{len(p.overflow_layers)} layer(s) overflow FP16, first {first}"
        elif unit and not p.rel_l2 > p.tolerance:
            why = f"worst image's mean error {p.mean_abs_worst:.3g} {unit} > {tol_m:g} {unit}"
        else:
            why = f"rel L2 vs FP32 {p.rel_l2:.3g} > {p.tolerance}"
        subset = f" ({p.subset})" if p.subset else ""
        return Verdict.failed(f"FP16 compute is wrong for this model ({why}){subset}: the app must enforce FP32",
                              figures, limits)
    subset = f"; {p.subset}" if p.subset else ""
    return Verdict.passed(figures, limits, f"FP16 compute within {p.tolerance}{in_unit} on {p.inputs} image(s){subset}")
