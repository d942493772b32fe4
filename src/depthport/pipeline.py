"""`depthport export`: build -> rewrite -> export each target -> check -> report.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .atomic import write_text
from .build import build
from .export.targets import ExportContext, load_all
from .outdir import require_folder, staged, written
from .preprocess import InputError
from .registry import get_spec
from .report.provenance import command_line, machine, versions
from .report.schema import dumps
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


def parse_targets(text: str) -> list[str]:
    known = load_all()
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise InputError("no targets given")
    unknown = [t for t in names if t not in known]
    if unknown:
        raise InputError(f"unknown target(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}")
    return names


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
    """Export every requested target into ``req.out_dir`` (staged beside it, moved into place at the end) and
    write report.json; returns the report."""
    spec = get_spec(req.model)
    require_folder(req.out_dir)
    targets = load_all()
    step = progress or (lambda msg: None)
    step(f"building {spec.id} at {req.input_hw[0]}x{req.input_hw[1]}")
    names = default_rewrites(req.resize, req.fold_normalization, req.fp16_safe_norm)
    built = build(spec, req.input_hw, req.weights, rewrites=names, pos_formula=req.pos_formula)
    with staged(req.out_dir) as staging:
        report = _export_into(staging, req, spec, built, names, targets, step)
        report["written_files"] = written(staging) + ["report.json"]
        write_text(staging / "report.json", dumps(report))
    return report


def base_model(spec, weights) -> str | None:
    """The Hub repo the weights came from (the model's published repo for a local checkpoint); None when random."""
    if weights.random:
        return None
    if weights.source.startswith("hf://"):
        return weights.source.removeprefix("hf://")
    return spec.hf_repo or spec.official_repo or None


def _export_into(folder: Path, req: ExportRequest, spec, built, names: list[str], targets, step) -> dict:
    ctx = ExportContext(built, folder, spec.id.replace("-", "_"), options=dict(req.options))
    report = {
        "model": spec.id,
        "weights": "random" if built.weights.random else built.weights.source,
        "random_weights": built.weights.random,
        "weights_detail": {"source": built.weights.source, "format": built.weights.format,
                           "revision": built.weights.revision, "licence": spec.licence},
        "base_model": base_model(spec, built.weights),
        "input_shape": [1, 3, *req.input_hw],
        "output": spec.output,
        "output_space": spec.output_space,
        "normalization": "folded (input RGB 0..1)" if req.fold_normalization else "ImageNet mean/std, RGB, x/255",
        "pos_embed_formula": built.pos_formula,
        "rewrites": names,
        "command": req.command,
        "versions": versions(),
        "machine": machine(),
        "skipped": sorted(ctx.options.get("skip", set())),
        "artifacts": [],
    }
    if "ledger" not in ctx.options.get("skip", set()):
        step("measuring each rewrite's numerical effect")
        report["rewrite_ledger"] = rewrite_ledger(spec, built, req, names)
    for name in req.targets:
        step(f"exporting {name}")
        report["artifacts"].append(targets[name](ctx))
    for module in post_steps():
        step(f"{module.__name__.rsplit('.', 2)[-2]}: {module.__doc__.strip().splitlines()[0] if module.__doc__ else ''}")
        module.apply(ctx, report)
    return report


