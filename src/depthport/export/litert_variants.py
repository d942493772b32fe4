"""LiteRT variants of the optimised FP32 graph: FP16 weights, dynamic-range INT8, weight-only INT8.

Each variant is made by ai-edge-quantizer from the FP32 .tflite that ``litert-fp32`` writes (exported to a
temporary file when that target is not requested), so all keep FP32 input/output and the signature
``serving_default(args_0) -> output_0``: the files are interchangeable.

Every LiteRT entry gets ``gpu_ok`` (False, with ``gpu_reason``, when the mobile GPU must not get the file:
a static GPU-check error, or with ``run_gpu`` a failed compile or wrong numbers on the LiteRT GPU
accelerator) and ``fp16_compute``: what FP16 compute on the GPU would do to this model, predicted on the CPU
once per export (``depthport.fp16.simulate``); ``needs_enforce_f32`` says whether the app must ask for
``GpuOptions(enforce_f32=True)``.

ctx.options read here:
- ``run_gpu``: also compile each file GPU-only (SwiftShader where there is no GPU) and compare GPU with CPU,
  on a small-shape re-export of the same variant when the export shape is large;
- ``int8_keep_float``: regex of op scopes that stay float in the INT8 files (default ``INT8_KEEP_FLOAT``);
- ``fp16_sim``: False to skip the FP16-compute prediction; ``fp16_accumulate``: "fp16" (default) or "fp32"
  for matrix-product accumulation in it ("fp32" is about 3x faster and still catches every op output
  that overflows, but not partial sums).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..atomic import write_bytes
from ..fp16.safe import fp16_safe_norm
from ..fp16.simulate import simulate_fp16
from ..fp16.weights import cast_constants_fp16, fp16_recipe
from ..report.schema import SKIPPED, Verdict, set_check
from . import litert
from .targets import GPU_TARGETS, ExportContext, target

# Ops left in float in the INT8 files, matched against the op's output tensor names (which carry the PyTorch
# module class):
# - the norms' (1, C) averaging FC (its input d*d has a wide range that dynamic activation quantization
#   flattens) and the resize matrices (exact interpolation weights): INT8 would hurt for no size gain;
# - the DPT head's fusion blocks and output convs: few weights (0.55 M for ViT-S) working on the largest maps,
#   where one per-tensor activation scale for the whole map costs the most. Measured on da2-small 518x686
#   (random weights, 6 built-in images): pooled rel L2 vs transformers 2.091 % -> 1.161 %, size 27.13 ->
#   27.68 MB (their weights are stored as float16), CPU time unchanged (0.70x FP32).
INT8_KEEP_FLOAT = r"ScaleNorm|Resize|FusionBlock|out_conv[123]"
# Float FC constants left in an INT8 file (norm averages, resize matrices) stay float32: they are exact.
KEEP_FP32_CONSUMERS = frozenset({"FULLY_CONNECTED"})
SMALL_SIDE = 126  # short side of the re-export used for the numerical GPU run of a large model
INT8_GPU_TOL = 5e-2  # GPU computes INT8 weights in float, the CPU quantizes activations: they differ by that


@dataclass(frozen=True)
class Variant:
    target: str
    suffix: str
    precision: str
    recipe: str
    make: Callable[[Path, dict], bytes]
    gpu_tol: float | None = None


def quantize(src: Path, recipe) -> bytes:
    """ai-edge-quantizer on a .tflite file with the given recipe; returns the quantized model bytes."""
    from ai_edge_quantizer import quantizer

    from ..quiet import native_stderr_muted

    with native_stderr_muted(not litert.verbose()):
        result = quantizer.Quantizer(str(src), recipe).quantize(enable_progress_bar=False,
                                                                  enable_progress_report=False)
    return bytes(result.quantized_model)


def int8_recipe(keep_float: str | None = INT8_KEEP_FLOAT) -> list[dict]:
    """``dynamic_wi8_afp32`` (INT8 channelwise weights, activations quantized at run time), with the ops whose
    scope matches ``keep_float`` left in float32."""
    from ai_edge_quantizer import recipe

    rules = recipe.dynamic_wi8_afp32()
    if keep_float:
        rules.append({"regex": keep_float, "operation": "*", "algorithm_key": "no_quantize"})
    return rules


def make_fp16(src: Path, options: dict) -> bytes:
    data, _ = cast_constants_fp16(quantize(src, fp16_recipe()))
    return data


def make_int8(src: Path, options: dict) -> bytes:
    """Dynamic INT8; the float constants INT8 leaves (position embedding, the head convs kept float) stored as
    float16, except those feeding an FC (``KEEP_FP32_CONSUMERS``)."""
    data = quantize(src, int8_recipe(options.get("int8_keep_float", INT8_KEEP_FLOAT)))
    return cast_constants_fp16(data, skip_consumers=KEEP_FP32_CONSUMERS)[0]


def make_int8_weight(src: Path, options: dict) -> bytes:
    from ai_edge_quantizer import recipe

    return quantize(src, recipe.weight_only_wi8_afp32())


VARIANTS = {
    v.target: v
    for v in [
        Variant("litert-fp16", "_fp16", "fp16",
                "float16 weights: ai-edge-quantizer float_casting (FULLY_CONNECTED, CONV) + depthport fp16 "
                "constants (every other float32 constant of >= 1024 values: position embedding, BATCH_MATMUL "
                "weights); FP32 I/O", make_fp16),
        Variant("litert-int8", "_int8", "int8",
                "ai-edge-quantizer dynamic_wi8_afp32 (INT8 channelwise weights, activations quantized at run "
                "time); norm and resize FCs kept float32; DPT fusion blocks and output convs kept float "
                "(float16 weights), as are the other float constants (position embedding)",
                make_int8, INT8_GPU_TOL),
        Variant("litert-int8-weight", "_int8_weight", "int8",
                "ai-edge-quantizer weight_only_wi8_afp32 (INT8 weights dequantized to float, FP32 compute)",
                make_int8_weight, INT8_GPU_TOL),
    ]
}


def _scratch_dir(ctx: ExportContext) -> Path:
    """A temporary folder for this export's intermediate files, removed at exit."""
    if "litert-scratch" not in ctx.cache:
        folder = Path(tempfile.mkdtemp(prefix="depthport-litert-"))
        atexit.register(shutil.rmtree, folder, True)
        ctx.cache["litert-scratch"] = folder
    return ctx.cache["litert-scratch"]


def fp32_source(ctx: ExportContext) -> Path:
    """The FP32 .tflite of this export: the litert-fp32 artifact, or a temporary export of the same model."""
    if "litert-fp32" in ctx.cache:
        return ctx.cache["litert-fp32"]
    if "litert-fp32-source" not in ctx.cache:
        path = _scratch_dir(ctx) / f"{ctx.stem}_fp32.tflite"
        ctx.cache["litert-fp32-source"] = litert.export_tflite(ctx.built.model, ctx.built.input_hw, path)
    return ctx.cache["litert-fp32-source"]


def small_hw(input_hw: tuple[int, int], side: int = SMALL_SIDE, multiple: int = 14) -> tuple[int, int] | None:
    """A shape of the same aspect with the short side ``side``, or None when the export shape is not larger."""
    h, w = input_hw
    if min(h, w) <= side:
        return None
    scale = side / min(h, w)
    return tuple(max(multiple, round(n * scale / multiple) * multiple) for n in (h, w))


def _small_fp32(ctx: ExportContext) -> Path | None:
    """An FP32 re-export of the same model and rewrites at a small shape (None when the export is small)."""
    hw = small_hw(ctx.built.input_hw)
    if hw is None:
        return None
    if "litert-fp32-small" not in ctx.cache:
        from ..build import build

        b = ctx.built
        small = build(b.spec, hw, b.weights, rewrites=b.rewrites, pos_formula=b.pos_formula)
        path = _scratch_dir(ctx) / f"{ctx.stem}_small_fp32.tflite"
        ctx.cache["litert-fp32-small"] = litert.export_tflite(small.model, hw, path)
    return ctx.cache["litert-fp32-small"]


def gpu_runtime(ctx: ExportContext, path: Path, variant: Variant | None) -> dict:
    """Runtime section of the GPU check for ``path``; numbers come from a small re-export when there is one."""
    from ..check.verdict import check_tflite

    small = numeric = _small_fp32(ctx)
    if small is not None and variant is not None:
        numeric = _scratch_dir(ctx) / f"{ctx.stem}_small{variant.suffix}.tflite"
        write_bytes(numeric, variant.make(small, ctx.options))
    tol = variant.gpu_tol if variant is not None else None
    return check_tflite(path, run_gpu=True, numeric_file=numeric, rel_l2_tol=tol)["runtime"]


def gpu_checks(entry: dict, runtime: dict | None) -> tuple[Verdict, Verdict]:
    """(static, runtime) verdicts of a .tflite entry; the runtime one is "not measured (skipped on request)"
    when the runtime check was not asked for."""
    from ..check.gpu_runtime import empty_runtime
    from ..check.verdict import NOT_REQUESTED, runtime_verdict

    static = Verdict.from_dict(entry["gpu_check"]["static"])
    return static, runtime_verdict(runtime if runtime is not None else empty_runtime(NOT_REQUESTED))


def fp16_compute(ctx: ExportContext) -> dict | None:
    """The FP16-compute prediction for this export's model (computed once), as the artifact entry's value."""
    if ctx.options.get("fp16_sim", True) is False:
        return None
    if "fp16_compute" not in ctx.cache:
        from ..verify.images import image_set

        ctx.cache["fp16_compute"] = predict_fp16(ctx.built.model, ctx.built.input_hw,
                                                 normalize="fold_input_normalization" not in ctx.built.rewrites,
                                                 accumulate=ctx.options.get("fp16_accumulate", "fp16"),
                                                 images=image_set(ctx.options.get("images"))[1])
    return ctx.cache["fp16_compute"]


def predict_fp16(model: torch.nn.Module, input_hw: tuple[int, int], normalize: bool = True,
                 accumulate: str = "fp16", images: list | None = None) -> dict:
    """FP16-compute prediction over ``images`` ([(name, PIL image)], default the built-in chelsea); when it
    says FP32 must be enforced, also the prediction with the ``fp16_safe_norm`` rewrite applied."""
    import copy

    import skimage.data
    from PIL import Image

    from ..preprocess import to_tensor

    images = images or [("chelsea", Image.fromarray(skimage.data.chelsea()))]
    x = [torch.from_numpy(to_tensor(img, input_hw, normalize=normalize)) for _, img in images]
    entry = simulate_fp16(model, x, accumulate=accumulate).as_entry()
    entry["images"] = [name for name, _ in images]
    if entry["needs_enforce_f32"]:
        fixed = copy.deepcopy(model)
        try:
            fp16_safe_norm(fixed)
        except ValueError as exc:
            entry["with_fp16_safe_norm"] = {"error": str(exc)}
        else:
            after = simulate_fp16(fixed, x, accumulate=accumulate).as_entry()
            entry["with_fp16_safe_norm"] = {k: after[k] for k in
                                            ("rel_l2", "pearson", "overflow_layers", "first_bad_layer",
                                             "needs_enforce_f32")}
    return entry


def add_gpu_and_fp16(ctx: ExportContext, entry: dict, path: Path, variant: Variant | None) -> dict:
    """Add the GPU verdicts (static, and runtime with run_gpu, which then decides) and the FP16-compute
    prediction to a .tflite entry. The GPU verdict is required for the GPU targets only."""
    from ..check.verdict import gpu_decision

    runtime = gpu_runtime(ctx, path, variant) if ctx.options.get("run_gpu") else None
    if runtime is not None:
        entry["gpu_runtime"] = runtime
    static, on_gpu = gpu_checks(entry, runtime)
    for_gpu = entry["target"] in GPU_TARGETS
    set_check(entry, "gpu_static", static, required=for_gpu and runtime is None)
    set_check(entry, "gpu_runtime", on_gpu, required=for_gpu and runtime is not None)
    decided = gpu_decision(static, on_gpu)
    entry["gpu_ok"] = decided.to_dict()["passed"]
    entry["gpu_reason"] = None if decided.ok else (
        f"{'GPU runtime' if decided is on_gpu else 'static GPU check'}: {decided.reason}")
    prediction = fp16_compute(ctx)
    if prediction is not None:
        entry["fp16_compute"] = prediction
    set_check(entry, "fp16_compute", fp16_verdict(prediction), required=False)
    return entry


def fp16_verdict(prediction: dict | None) -> Verdict:
    """Pass when FP16 compute on the GPU is predicted to stay within tolerance of FP32 on every input."""
    if prediction is None:
        return Verdict.not_measured("FP16-compute prediction switched off (fp16_sim)", SKIPPED)
    if "error" in prediction:
        return Verdict.not_measured(f"FP16-compute prediction failed: {prediction['error']}")
    figures = {k: prediction.get(k) for k in ("rel_l2", "pearson", "max_abs_fp32", "inputs")}
    limits = {"rel_l2": prediction.get("tolerance")}
    if prediction["needs_enforce_f32"]:
        why = (f"{len(prediction['overflow_layers'])} layer(s) overflow FP16" if prediction.get("overflow_layers")
               else f"rel L2 vs FP32 {prediction['rel_l2']:.3g} > {prediction.get('tolerance')}")
        return Verdict.failed(f"FP16 compute is wrong for this model ({why}): the app must enforce FP32",
                              figures, limits)
    return Verdict.passed(figures, limits, f"FP16 compute within {prediction.get('tolerance')} "
                                           f"on {prediction.get('inputs')} image(s)")


def export_variant(ctx: ExportContext, variant: Variant) -> dict:
    path = ctx.out_dir / f"{ctx.stem}{variant.suffix}.tflite"
    write_bytes(path, variant.make(fp32_source(ctx), ctx.options))
    entry = litert.tflite_entry(ctx, path, variant.target, precision=variant.precision, recipe=variant.recipe)
    return add_gpu_and_fp16(ctx, entry, path, variant)


def _register(variant: Variant) -> None:
    target(variant.target)(lambda ctx: export_variant(ctx, variant))


for _variant in VARIANTS.values():
    _register(_variant)


@target("litert-fp32")
def litert_fp32(ctx: ExportContext) -> dict:
    """``depthport.export.litert.litert_fp32`` plus gpu_ok and the FP16-compute prediction."""
    entry = litert.litert_fp32(ctx)
    return add_gpu_and_fp16(ctx, entry, ctx.cache["litert-fp32"], None)
