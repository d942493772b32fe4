"""check: every file's checks that need no reference model. For each .tflite the GPU verdicts (static rules;
with ``run_gpu`` the real LiteRT GPU accelerator, which then decides) and the FP16-compute prediction; for
each .pte the delegation coverage. The GPU verdict is required for the GPU targets, delegation for every .pte."""

from __future__ import annotations

import functools
from pathlib import Path

from ..atomic import write_bytes
from ..core.report_model import GpuCheck, GpuRuntime, Units, dump, load
from ..core.schema import ArtifactJson, Fp16PredictionJson, ReportJson
from ..export.context import ExportContext
from ..export.litert_variants import VARIANTS, Variant
from ..export.small import small_export
from ..export.targets import FP16_PTE_TARGETS, GPU_TARGETS
from ..fp16.simulate import XNNPACK_MODES
from ..runtimes.torch import torch_threads
from .delegation import delegation_verdict
from .fp16_compute import PHONE_ACCUMULATE, SUMMARY_KEYS, fp16_arithmetic_entry, fp16_verdict, predict_fp16
from .gpu_runtime import empty_runtime
from .verdict import NOT_REQUESTED, check_tflite, runtime_verdict

BACKENDS = {"xnnpack": "XNNPACK", "coreml": "Core ML"}


def apply(ctx: ExportContext, report: dict | ReportJson) -> None:
    report = ReportJson(report)
    tflites = [a for a in report.artifacts if a.file.endswith(".tflite")]
    for i, art in enumerate(tflites, 1):
        ctx.detail(f"GPU check {i}/{len(tflites)}: {art.file}")
        check_litert(ctx, art, ctx.out_dir / art.file)
    for art in report.artifacts:
        if art.target in FP16_PTE_TARGETS:
            fp16_arithmetic(ctx, art)
        if art.delegation:
            verdict = delegation_verdict(art.delegation, BACKENDS.get(art.backend, art.backend))
            art.set_check("delegation", verdict, required=True)


def ahead(ctx: ExportContext, targets: list[str]) -> None:
    """The FP16-compute predictions this stage will make for ``targets``' files, made before the files exist (they
    need only the model): the export stage runs this while its children convert (``export.children``), and ``apply``
    then finds them in ``ctx``."""
    if any(t == "litert-fp32" or t in VARIANTS for t in targets):  # a .tflite
        fp16_prediction(ctx)
    for target in targets:
        if target in FP16_PTE_TARGETS:
            fp16_arithmetic_entry(functools.partial(_phone_prediction, ctx, target))


def _phone_prediction(ctx: ExportContext, target: str, images: int | None) -> dict | None:
    return fp16_prediction(ctx, PHONE_ACCUMULATE, target, images=images)


def fp16_arithmetic(ctx: ExportContext, art: dict | ArtifactJson) -> None:
    """What judges an fp16 .pte for devices that compute in FP16 (``fp16_arithmetic_entry``); a file of no known
    fp16 target (`depthport verify` of any fp16 .pte) is predicted in the plain ``xnnpack-fp16`` form."""
    art = ArtifactJson(art)
    target = art.target if art.target in FP16_PTE_TARGETS else "xnnpack-fp16"
    art.fp16_arithmetic = fp16_arithmetic_entry(functools.partial(_phone_prediction, ctx, target))


def check_litert(ctx: ExportContext, art: dict | ArtifactJson, path: Path) -> dict:
    """Add the GPU verdicts and the FP16-compute prediction to a .tflite entry; returns the entry."""
    art = ArtifactJson(art)
    found = check_tflite(path)
    art.gpu_check = dump(GpuCheck(found.violations))  # the verdicts: the checks below
    runtime = gpu_runtime(ctx, path, VARIANTS.get(art.target)) if ctx.options.run_gpu else None
    if runtime is not None:
        art.gpu_runtime = dump(runtime)
    on_gpu = runtime_verdict(runtime if runtime is not None else empty_runtime(NOT_REQUESTED))
    for_gpu = art.target in GPU_TARGETS
    art.set_check("gpu_static", found.static, required=for_gpu and runtime is None)
    art.set_check("gpu_runtime", on_gpu, required=for_gpu and runtime is not None)
    prediction = fp16_prediction(ctx)
    if prediction is not None:
        art.fp16_compute = prediction
    art.set_check("fp16_compute", fp16_verdict(prediction), required=False)
    return art.data


def gpu_runtime(ctx: ExportContext, path: Path, variant: Variant | None) -> GpuRuntime:
    """Runtime section of the GPU check for ``path``; numbers come from a small re-export when there is one."""
    small = small_export(ctx.built, ctx.scratch, ".tflite", ctx.small)
    small = numeric = small.path if small is not None else None
    if small is not None and variant is not None:
        numeric = ctx.scratch / f"{ctx.stem}_small{variant.suffix}.tflite"
        write_bytes(numeric, variant.make(small, ctx.options))
    tol = variant.gpu_tol if variant is not None else None
    return check_tflite(path, run_gpu=True, numeric_file=numeric, rel_l2_tol=tol).runtime


def _layer_detail(ctx: ExportContext, what: str, images: int, done: int, total: int) -> None:
    """'FP16-compute prediction (...): image 1/2, 40/62 layer passes' (an FP32 and an FP16 run an image)."""
    per = max(1, total // images)
    image = min(images, (done - 1) // per + 1)
    ctx.detail(f"{what}: image {image}/{images}, {done % per or per}/{per} layer passes", done, total)


def fp16_prediction(ctx: ExportContext, accumulate: str | None = None,
                    target: str = "xnnpack-fp16", images: int | None = None) -> dict | None:
    """The FP16-compute prediction of this export's model over the verification images, computed once per
    accumulation mode (default: the GPU's, ``fp16_accumulate``); the "xnnpack" modes simulate the fp16 .pte
    ``target``'s form, once per target. ``images``: on at most that many (default: the evidence budget's)."""
    if not ctx.options.fp16_sim:
        return None
    mode = accumulate or ctx.options.fp16_accumulate
    key = (f"{mode}:{target}" if mode in XNNPACK_MODES else mode) + (f":{images}" if images is not None else "")
    if key not in ctx.fp16_predictions:
        what = f"FP16-compute prediction ({mode} accumulation)"
        ctx.detail(what)
        _, every, prompts, _ = ctx.verification_set()
        budget = ctx.evidence_budget
        count, subset = budget.count, budget.of("FP16-compute prediction")
        if images is not None and images < count:
            count, subset = images, (f"FP16-compute prediction on {images} of {budget.images} images (beside the "
                                     "file's own measurement on FP16 arithmetic)")
        images = every[:count]
        with torch_threads(ctx.options.threads):  # as verify runs the same model: its FP32 runs are eager runs
            ctx.fp16_predictions[key] = predict_fp16(
                ctx.built.model, ctx.built.input_hw, normalize="fold_input_normalization" not in ctx.built.rewrites,
                accumulate=mode, images=images, unit=load(Units, ctx.built.spec.units()).label or "",
                on_layer=functools.partial(_layer_detail, ctx, what, len(images)), target=target,
                prompts=prompts, cache=ctx.cache, cache_id=(*ctx.cache_id, ctx.built.rewrites, ctx.built.pos_formula),
                subset=subset, fp32_outputs=ctx.eager_outputs)
        found = Fp16PredictionJson(ctx.fp16_predictions[key])
        if mode == "fp16" and found.needs_enforce_f32:
            # LiteRT's FP16_WITH_FP32_ACCUM: FP16 tensors, FP32 accumulation (the GPU mode between the two)
            accum = fp16_prediction(ctx, "fp32")
            found.fp16_with_fp32_accum = {k: accum[k] for k in (*SUMMARY_KEYS, "figures")}
    return ctx.fp16_predictions[key]
