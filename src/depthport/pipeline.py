"""`depthport export`: the ordered stages build -> rewrite ledger -> export -> check -> verify -> bench -> report
-> card, each a plain function over one ``ExportContext``, staged beside ``--out`` and moved into place at the
end (``outdir``). May import every stage; only the command line imports this module."""

from __future__ import annotations

import difflib
import functools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .bench import stage as bench_stage
from .build import build, build_steps
from .check import stage as check_stage
from .core.memory import give_back
from .core.schema import ReportJson, write_report
from .errors import InputError
from .export.children import convert_all
from .export.context import ExportContext, StageOptions
from .export.targets import TARGETS
from .outdir import require_folder, staged, written
from .registry import ModelSpec, get_spec
from .report import card_stage
from .report import header as report_header
from .report import stage as report_stage
from .rewrites import default_rewrites
from .verify import stage as verify_stage


__all__ = ["ExportOptions", "StageOptions", "parse_targets", "run_export"]


@dataclass(frozen=True, kw_only=True)
class ExportOptions:
    """One export, as the command line asks for it."""

    model: str
    weights: str
    input_hw: tuple[int, int]
    out_dir: Path
    targets: tuple[str, ...]
    resize: str = "exact"
    fold_normalization: bool = False
    pos_formula: str | None = None
    fp16_safe: tuple[str, ...] = ()  # FP16 guards (rewrites.FP16_SAFE): "norm", "attention"
    prompt_hw: tuple[int, int] | None = None  # a prompted model's prompt shape (default: the model's)
    command: str = ""
    stages: StageOptions = field(default_factory=StageOptions)


# What people call a file kind, and the targets that make it
TARGET_KINDS = {"litert": ("litert-",), "tflite": ("litert-",), "xnnpack": ("xnnpack-",),
                "pte": ("xnnpack-", "coreml"), "executorch": ("xnnpack-", "coreml")}


def parse_targets(text: str) -> tuple[str, ...]:
    """'litert-fp32,onnx' -> the target names, all known, or an InputError before any work. Case and '_' for '-'
    do not matter (LiteRT_FP32 is litert-fp32); a file kind (tflite, pte, xnnpack, ...) or a near miss is answered
    with the targets it may mean."""
    names = [t.strip().lower().replace("_", "-") for t in text.split(",") if t.strip()]
    if not names:
        raise InputError("no targets given")
    unknown = [t for t in names if t not in TARGETS]
    if unknown:
        meant = {t: _meant(t) for t in unknown}
        said = "; ".join(f"{t}: did you mean {', '.join(m[:-1])} or {m[-1]}?" if len(m) > 1 else
                         f"{t}: did you mean {m[0]}?" if m else t for t, m in meant.items())
        available = "" if all(meant.values()) else f"; available: {', '.join(sorted(TARGETS))}"
        raise InputError(f"unknown target(s) {said}{available}")
    return tuple(dict.fromkeys(names))


def _meant(name: str) -> list[str]:
    """The targets an unknown target name may mean, the FP32 one first: a file kind's, those it begins, or close
    spellings."""
    starts = TARGET_KINDS.get(name, (f"{name}-",))
    by_kind = [t for t in TARGETS if t.startswith(starts)]
    close = by_kind or difflib.get_close_matches(name, list(TARGETS), n=3, cutoff=0.6)
    return sorted(close, key=lambda t: (not t.endswith("fp32"), t))


def ledger_stage(ctx: ExportContext, report: dict | ReportJson) -> None:
    """Each rewrite's effect on one built-in natural image (kept in the evidence cache), at the export shape or, for
    a model too large for the evidence budget, a smaller one (``core.evidence_budget``). Meanwhile a Large model's
    built model and weights wait on disk: the ledger's float64 model holds the weights."""
    import skimage.data
    from PIL import Image

    from .preprocess import to_tensor
    from .rewrites.ledger import ledger_rewrites, measure

    b = ctx.built
    hw = ctx.evidence_budget.ledger_hw
    x = to_tensor(Image.fromarray(skimage.data.chelsea()), hw)
    if b.prompt_hw:
        from .core.prompts import builtin_prompt, prompt_input

        x = (x, prompt_input(builtin_prompt("chelsea", b.prompt_hw)[0], b.prompt_hw, "chelsea"))
    names = ledger_rewrites(b.rewrites)
    cache = ctx.cache
    key = (cache.key("rewrite-ledger", *ctx.cache_id, names, b.pos_formula, arrays=x if b.prompt_hw else (x,))
           if cache is not None else None)
    ledger = cache.get_value(key) if key else None
    if ledger is None:
        if b.release():  # a Large model waits on disk while the ledger builds and rewrites its own float64 one
            give_back()
        passes = len(names) + 1
        at = f" at {hw[0]}x{hw[1]}" if tuple(hw) != tuple(b.input_hw) else ""
        steps = build_steps(b.spec, hw, b.weights, names, pos_formula=b.pos_formula, prompt_hw=b.prompt_hw)
        ledger = json.loads(json.dumps(measure(
            steps, x, lambda done, name: ctx.detail(f"pass {done}/{passes}{at}: {name}", done, passes))))
        if key:
            cache.put_value(key, ledger)
    ReportJson(report).update(rewrite_ledger=ledger, rewrite_ledger_hw=list(hw))


def export_stage(ctx: ExportContext, report: dict | ReportJson) -> None:
    """Write one file per requested target; where children convert them, the check stage's FP16-compute predictions
    are made beside them (``check.stage.ahead``)."""
    report = ReportJson(report)
    targets = list(report.targets)
    for entry in convert_all(ctx, targets, meanwhile=functools.partial(check_stage.ahead, ctx, targets)):
        report.add(entry)


@dataclass(frozen=True)
class Stage:
    """One stage; ``skipped`` records in the report what skipping it on request (``--skip``) leaves unmeasured. Both
    take report.json's object and write it through ``core.schema``'s views."""

    name: str
    run: Callable[[ExportContext, dict], None]
    skipped: Callable[[ExportContext, dict], None] | None = None

    def skips(self, ctx: ExportContext) -> bool:
        return ctx.options.skips(self.name.split()[-1])

    def apply(self, ctx: ExportContext, report: dict) -> None:
        """The stage, or what skipping it on request leaves in the report: the one place ``--skip`` is read."""
        if not self.skips(ctx):
            self.run(ctx, report)
        elif self.skipped is not None:
            self.skipped(ctx, report)


STAGES = (
    Stage("rewrite ledger", ledger_stage),
    Stage("export", export_stage),
    Stage("check", check_stage.apply),
    Stage("verify", verify_stage.apply, verify_stage.skipped),
    Stage("bench", bench_stage.apply),
    Stage("report", report_stage.apply),
    Stage("card", card_stage.apply),
)


class Quiet:
    """The progress reporter that shows nothing (output not a terminal, --quiet, or a library call)."""

    def stage(self, name: str):
        import contextlib

        return contextlib.nullcontext()

    def detail(self, text: str, done: int | None = None, total: int | None = None) -> None:
        pass


def run_export(opts: ExportOptions, progress=None) -> dict:
    """Run every stage for ``opts`` and write report.json; returns the report. ``progress`` shows the stages
    (``cli.progress.StageProgress``)."""
    progress = progress or Quiet()
    spec = get_spec(opts.model)
    require_folder(opts.out_dir)
    with progress.stage(f"build {spec.id} at {opts.input_hw[0]}x{opts.input_hw[1]}"):
        names = default_rewrites(opts.resize, opts.fold_normalization, opts.fp16_safe)
        built = build(spec, opts.input_hw, opts.weights, rewrites=names, pos_formula=opts.pos_formula,
                      prompt_hw=opts.prompt_hw)
    with staged(opts.out_dir) as folder:
        ctx = ExportContext(built, folder, spec.id.replace("-", "_"), options=opts.stages, progress=progress)
        report = ReportJson(new_report(opts, spec, built))
        report.evidence_budget = ctx.evidence_budget.as_entry()
        for stage in STAGES:
            with progress.stage(stage.name + (" (skipped on request)" if stage.skips(ctx) else "")):
                stage.apply(ctx, report.data)
                built.weights.release()  # a Large model's weights wait on disk until a stage needs them
                give_back()
        report.written_files = written(folder) + ["report.json"]
        write_report(folder, report)
    return report.data


def new_report(opts: ExportOptions, spec: ModelSpec, built) -> dict:
    """report.json before the stages fill in the artifacts and their checks: the common header and the export's
    own fields."""
    return report_header.new_report(spec, built, opts.command, targets=list(opts.targets),
                                    skipped=sorted(opts.stages.skip), started=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
