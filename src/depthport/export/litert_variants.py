"""LiteRT variants of the optimised FP32 graph: FP16 weights, dynamic-range INT8, weight-only INT8.

Each variant is made by ai-edge-quantizer from the FP32 .tflite that ``litert-fp32`` writes (exported to a
temporary file when that target is not requested), so all keep FP32 input/output and the signature
``serving_default(args_0) -> output_0``: the files are interchangeable. Their GPU verdicts and the FP16-compute
prediction are the check stage's (``depthport.check.stage``).

Options read here: ``int8_keep_float``, the regex of op scopes that stay float in the INT8 files (default
``INT8_KEEP_FLOAT``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..atomic import write_bytes
from ..fp16.weights import cast_constants_fp16, fp16_recipe
from . import litert
from .context import ExportContext

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


def make_fp16(src: Path, options=None) -> bytes:
    data, _ = cast_constants_fp16(quantize(src, fp16_recipe()))
    return data


def make_int8(src: Path, options=None) -> bytes:
    """Dynamic INT8; the float constants INT8 leaves (position embedding, the head convs kept float) stored as
    float16, except those feeding an FC (``KEEP_FP32_CONSUMERS``)."""
    keep = getattr(options, "int8_keep_float", None) or INT8_KEEP_FLOAT
    data = quantize(src, int8_recipe(keep))
    return cast_constants_fp16(data, skip_consumers=KEEP_FP32_CONSUMERS)[0]


def make_int8_weight(src: Path, options=None) -> bytes:
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


def fp32_source(ctx: ExportContext) -> Path:
    """The FP32 .tflite of this export: the litert-fp32 file, or a temporary export of the same model."""
    if ctx.fp32_source is None:
        path = ctx.scratch / f"{ctx.stem}_fp32.tflite"
        ctx.fp32_source = litert.export_tflite(ctx.built.model, ctx.built.input_hw, path)
    return ctx.fp32_source


def export_variant(ctx: ExportContext, variant: Variant) -> dict:
    path = ctx.out_dir / f"{ctx.stem}{variant.suffix}.tflite"
    write_bytes(path, variant.make(fp32_source(ctx), ctx.options))
    ctx.files[variant.target] = path
    return litert.tflite_entry(ctx, path, variant.target, precision=variant.precision, recipe=variant.recipe)
