"""Export targets by name. Each writes one file into the output folder and returns its report entry.

A target is a function ``(ctx: ExportContext) -> dict``; the dict holds at least file, target, bytes,
input_shape and output_shape. Modules that add targets register them here with ``@target("name")``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..build import Built

TARGETS: dict[str, Callable[["ExportContext"], dict]] = {}
# Targets whose file is meant for the mobile GPU: their GPU verdict decides whether they ship.
GPU_TARGETS = ("litert-fp32", "litert-fp16")


@dataclass
class ExportContext:
    built: Built
    out_dir: Path
    stem: str
    options: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict)

    @property
    def input_shape(self) -> list[int]:
        return [1, 3, *self.built.input_hw]

    @property
    def output_shape(self) -> list[int]:
        return self.built.spec.output_shape(self.built.input_hw)


def target(name: str):
    def register(fn):
        TARGETS[name] = fn
        return fn

    return register


def load_all() -> dict[str, Callable[[ExportContext], dict]]:
    """Import every module that registers targets; returns the registry."""
    from . import litert  # noqa: F401

    for optional in ("litert_variants", "executorch", "onnx"):
        try:
            __import__(f"{__package__}.{optional}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{optional}":
                raise
    return TARGETS


def artifact_entry(ctx: ExportContext, path: Path, name: str, **extra) -> dict:
    return {"file": path.name, "target": name, "bytes": path.stat().st_size, "input_shape": ctx.input_shape,
            "output_shape": ctx.output_shape, **extra}
