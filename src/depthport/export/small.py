"""One small-shape FP32 re-export of an export's model and rewrites, made once per export and file kind.

Stages that need numbers from a runtime too slow for the full shape (the LiteRT GPU accelerator's numerical run,
the browser's GPU backends on SwiftShader) run this file instead, at the same aspect (``small_hw``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

SMALL_SIDE = 126  # the short side of the small shape


@dataclass(frozen=True)
class SmallExport:
    path: Path
    hw: tuple[int, int]
    model: nn.Module  # depthport's eager model at ``hw``: the reference the small file is compared with


def small_hw(input_hw: tuple[int, int], side: int = SMALL_SIDE, multiple: int = 14) -> tuple[int, int] | None:
    """A shape of the same aspect with the short side ``side``, or None when the export shape is not larger."""
    h, w = input_hw
    if min(h, w) <= side:
        return None
    scale = side / min(h, w)
    return tuple(max(multiple, round(n * scale / multiple) * multiple) for n in (h, w))


def small_export(built, folder: Path, suffix: str = ".tflite", memo: dict | None = None) -> SmallExport | None:
    """The small re-export of ``built`` as a ``suffix`` file (.tflite or .onnx) in ``folder``; None when the export
    is small already. ``memo`` (an export's shared dict) keeps the model and each file, so each is made once."""
    hw = small_hw(built.input_hw)
    if hw is None:
        return None
    memo = {} if memo is None else memo
    if suffix not in memo:
        from ..build import build

        if "model" not in memo:
            memo["model"] = build(built.spec, hw, built.weights, rewrites=built.rewrites,
                                  pos_formula=built.pos_formula, prompt_hw=built.prompt_hw).model
        path = Path(folder) / f"small_{hw[0]}x{hw[1]}_fp32{suffix}"
        if suffix == ".onnx":
            from .onnx import export_onnx

            export_onnx(memo["model"], hw, path)
        else:
            from .litert import export_tflite

            export_tflite(memo["model"], hw, path)
        memo[suffix] = SmallExport(path, hw, memo["model"])
    return memo[suffix]
