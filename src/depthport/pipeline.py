"""`depthport export`: build -> rewrite -> export each target -> check -> report.json."""

from __future__ import annotations

import json
import platform
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .atomic import write_text
from .build import build
from .export.targets import ExportContext, load_all
from .preprocess import InputError
from .registry import get_spec
from .rewrites import default_rewrites


@dataclass
class ExportRequest:
    model: str
    weights: str
    input_hw: tuple[int, int]
    out_dir: Path
    targets: list[str]
    resize: str = "exact"
    fold_normalization: bool = False
    pos_formula: str | None = None
    command: str = ""
    fp16_safe_norm: bool = False
    options: dict = field(default_factory=dict)


# Steps run after the targets, in order, if their module exists; each has apply(ctx, report) and may add keys
# to report["artifacts"] entries, write files beside them, or move a variant out of the shipped set.
POST_STEPS = ["depthport.verify.step", "depthport.bench.step", "depthport.report.step", "depthport.report.card_step"]


def post_steps() -> list:
    import importlib

    steps = []
    for name in POST_STEPS:
        try:
            steps.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if not (exc.name and name.startswith(exc.name)):
                raise
    return steps


# Targets whose file is meant for the mobile GPU: a GPU-check error stops the export.
GPU_TARGETS = ("litert-fp32", "litert-fp16")


class GpuCheckFailed(RuntimeError):
    """A GPU target's file would not run (correctly) on the mobile GPU."""


def require_gpu_clean(artifacts: list[dict]) -> None:
    for art in artifacts:
        check = art.get("gpu_check") or {}
        if art["target"] in GPU_TARGETS and check.get("gpu_clean") is False:
            errors = sorted({f"{v['op']} ({v['rule']})" for v in check.get("violations", []) if v["severity"] == "error"})
            raise GpuCheckFailed(f"{art['file']} is not GPU-clean: {', '.join(errors)}; see `depthport check {art['file']}`")


def parse_targets(text: str) -> list[str]:
    known = load_all()
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise InputError("no targets given")
    unknown = [t for t in names if t not in known]
    if unknown:
        raise InputError(f"unknown target(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}")
    return names


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "depthport": __version__}
    for pkg in ("torch", "litert-torch", "ai-edge-litert", "ai-edge-quantizer", "executorch", "onnxruntime",
                "transformers"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def machine() -> dict[str, str | int]:
    import os

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count() or 0, "os": platform.platform()}


def rewrite_ledger(spec, built, req: ExportRequest, names: list[str]) -> list[dict]:
    """Each rewrite's effect on one built-in natural image at the export shape.

    The input-normalisation fold changes what the input means, so it is checked by the tests, not here.
    """
    import skimage.data

    from PIL import Image

    from .preprocess import to_tensor
    from .rewrites.ledger import measure

    image = Image.fromarray(skimage.data.chelsea())
    x = to_tensor(image, req.input_hw)
    return measure(lambda r: build(spec, req.input_hw, built.weights, rewrites=r, pos_formula=built.pos_formula).model,
                   [n for n in names if n != "fold_input_normalization"], x)


def run_export(req: ExportRequest, progress=None) -> dict:
    """Export every requested target into ``req.out_dir`` and write report.json; returns the report."""
    spec = get_spec(req.model)
    targets = load_all()
    step = progress or (lambda msg: None)
    step(f"building {spec.id} at {req.input_hw[0]}x{req.input_hw[1]}")
    names = default_rewrites(req.resize, req.fold_normalization, req.fp16_safe_norm)
    built = build(spec, req.input_hw, req.weights, rewrites=names, pos_formula=req.pos_formula)
    req.out_dir.mkdir(parents=True, exist_ok=True)
    ctx = ExportContext(built, req.out_dir, spec.id.replace("-", "_"), options=dict(req.options))
    report = {
        "model": spec.id,
        "weights": "random" if built.weights.random else built.weights.source,
        "random_weights": built.weights.random,
        "weights_detail": {"source": built.weights.source, "format": built.weights.format,
                           "revision": built.weights.revision, "licence": spec.licence},
        "base_model": spec.hf_repo or None,
        "input_shape": [1, 3, *req.input_hw],
        "output": spec.output,
        "normalization": "folded (input RGB 0..1)" if req.fold_normalization else "ImageNet mean/std, RGB, x/255",
        "pos_embed_formula": built.pos_formula,
        "rewrites": names,
        "command": req.command,
        "versions": versions(),
        "machine": machine(),
        "artifacts": [],
    }
    if "ledger" not in ctx.options.get("skip", set()):
        step("measuring each rewrite's numerical effect")
        report["rewrite_ledger"] = rewrite_ledger(spec, built, req, names)
    for name in req.targets:
        step(f"exporting {name}")
        report["artifacts"].append(targets[name](ctx))
    require_gpu_clean(report["artifacts"])
    for module in post_steps():
        step(f"{module.__name__.rsplit('.', 2)[-2]}: {module.__doc__.strip().splitlines()[0] if module.__doc__ else ''}")
        module.apply(ctx, report)
    write_text(req.out_dir / "report.json", json.dumps(report, indent=2) + "\n")
    return report


def command_line() -> str:
    return shlex.join(["depthport", *sys.argv[1:]])


def clean_partial(out_dir: Path, existed: bool) -> None:
    """After a failed export, remove the output folder if this run created it."""
    if not existed and out_dir.exists():
        shutil.rmtree(out_dir, ignore_errors=True)
