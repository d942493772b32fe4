"""Export targets by name, each registered once here. A target writes one file into the output folder, records it
in ``ctx.files`` and returns its report entry (at least file, target, bytes, input_shape, output_shape); the
checks of that file are the check stage's."""

from __future__ import annotations

from functools import partial
from typing import Callable

from . import executorch, litert, litert_variants, onnx, web
from .context import ExportContext, artifact_entry

TARGETS: dict[str, Callable[[ExportContext], dict]] = {
    "litert-fp32": litert.litert_fp32,
    **{name: partial(litert_variants.export_variant, variant=v) for name, v in litert_variants.VARIANTS.items()},
    "xnnpack-fp32": executorch.xnnpack_fp32,
    "xnnpack-fp16": executorch.xnnpack_fp16,
    "xnnpack-fp16-split": executorch.xnnpack_fp16_split,
    "xnnpack-int8": executorch.xnnpack_int8,
    "coreml": executorch.coreml,
    "onnx": onnx.onnx_target,
    "onnx-dynamic": onnx.onnx_dynamic_target,
    **{name: partial(web.web_target, name=name) for name in web.WEB_TARGETS},
}
# fp16 .pte targets: verified for devices that compute in FP16 (check.fp16_compute.fp16_arithmetic_entry).
FP16_PTE_TARGETS = ("xnnpack-fp16", "xnnpack-fp16-split")
# Targets whose file is meant for the mobile GPU: their GPU verdict decides whether they ship.
GPU_TARGETS = ("litert-fp32", "litert-fp16")
# Targets that write a folder with a browser page: verified in headless Chromium (verify.browser).
WEB_TARGETS = tuple(web.WEB_TARGETS)

__all__ = ["FP16_PTE_TARGETS", "GPU_TARGETS", "TARGETS", "WEB_TARGETS", "ExportContext", "artifact_entry", "load_all"]


def load_all() -> dict[str, Callable[[ExportContext], dict]]:
    """Every export target by name."""
    return TARGETS
