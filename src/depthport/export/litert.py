"""LiteRT (.tflite) export through litert-torch: signature serving_default(args_0) -> output_0."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..atomic import atomic_path
from .context import ExportContext, artifact_entry


def verbose() -> bool:
    import os

    return os.environ.get("DEPTHPORT_VERBOSE", "") not in ("", "0")


def convert(model: nn.Module, input_hw: tuple[int, int]):
    """The litert-torch edge model for a (1, 3, H, W) float32 input; a prompted model (Prompt Depth Anything)
    gets a signature with two named inputs, ``image`` and ``prompt`` (1, 1, h, w)."""
    import litert_torch
    import litert_torch.progress

    litert_torch.progress.console.quiet = not verbose()
    sample = torch.zeros(1, 3, *input_hw)
    prompt_hw = getattr(model, "prompt_hw", None)
    if prompt_hw:
        named = {"image": sample, "prompt": torch.ones(1, 1, *prompt_hw)}
        return litert_torch.convert(model.eval(), sample_args=(), sample_kwargs=named)
    return litert_torch.convert(model.eval(), (sample,))


def export_tflite(model: nn.Module, input_hw: tuple[int, int], path: str | Path) -> Path:
    """Convert and write ``path`` atomically; returns the path. The flatbuffer is written from Python
    (``model_content()``): litert-torch's native file writer refuses a path that is not valid UTF-8."""
    data = convert(model, input_hw).model_content()
    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(data)
    return Path(path)


def tflite_entry(ctx: ExportContext, path: Path, name: str, **extra) -> dict:
    """Report entry of a .tflite: size, shapes and op statistics (its GPU check is the check stage's)."""
    from ..core.tflite_graph import graph_summary

    return artifact_entry(ctx, path, name, **graph_summary(path), **extra)


def litert_fp32(ctx: ExportContext) -> dict:
    path = export_tflite(ctx.built.model, ctx.built.input_hw, ctx.out_dir / f"{ctx.stem}_fp32.tflite")
    ctx.files["litert-fp32"] = ctx.fp32_source = path
    return tflite_entry(ctx, path, "litert-fp32", precision="fp32")
