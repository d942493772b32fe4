"""`depthport export MODEL`: build, rewrite, export, check, verify, bench and report, into one folder."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from .common import (add_evidence_args, add_threads, console, export_size, images_note, loosened_note,
                     status_console)

# export.targets.TARGETS' names, written out: importing it for the help would import torch for every command
TARGET_NAMES = ("litert-fp32", "litert-fp16", "litert-int8", "litert-int8-weight", "xnnpack-fp32", "xnnpack-fp16",
                "xnnpack-fp16-split", "xnnpack-int8", "coreml", "onnx", "onnx-dynamic", "web", "web-onnx")


def add_parser(subparsers):
    p = subparsers.add_parser("export", help="export a model to on-device files with a report")
    p.add_argument("model", help="model id (see `depthport models`)")
    p.add_argument("--weights", help="the model's published checkpoint (default; Hugging Face cache, then the hub) | "
                                     "random | stress (random with trained-weight outliers) | PATH (.pth, .safetensors, "
                                     "folder) | HF repo id")
    p.add_argument("--fallback-random", action="store_true",
                   help="when the published weights cannot be had (offline, nothing cached), use random weights "
                        "and say so, instead of failing")
    p.add_argument("--size", help="export shape HxW, both multiples of 14 (default: the model's)")
    p.add_argument("--long-side", type=int, help="long side in pixels, with --aspect (default 4:3)")
    p.add_argument("--aspect", help="W:H aspect (e.g. 4:3, 9:16), with --long-side or the model's default long side")
    p.add_argument("--targets", default="litert-fp32",
                   help=f"comma-separated export targets (default: litert-fp32), of: {', '.join(TARGET_NAMES)}")
    p.add_argument("--prompt-size", metavar="HxW",
                   help="prompted models (prompt-da-*): the prompt depth's shape (default: ARKit's 192x256; portrait "
                        "256x192)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--resize", choices=["exact", "approx"], default="exact",
                   help="exact: align_corners=True as band matrices; approx: GPU-native align_corners=False")
    p.add_argument("--fold-normalization", action="store_true", help="fold ImageNet mean/std in; input RGB 0..1")
    p.add_argument("--pos-embed", choices=["official", "transformers"],
                   help="position-embedding resampling formula (default: the checkpoint source's)")
    p.add_argument("--images", help="images for the parity checks: a folder, one image, or a quoted pattern "
                                    "('photos/**/*': subfolders too) (default: scikit-image's natural images)")
    add_threads(p, "CPU threads for verification and timing")
    p.add_argument("--skip", default="", help="comma-separated stages to skip: ledger, verify, bench, report, card")
    p.add_argument("--gate", action="append", default=[], metavar="PRECISION.METRIC=VALUE",
                   help="override a parity gate, e.g. fp32.pearson=0.9999 or int8.delta125=0.99 (repeatable)")
    add_evidence_args(p)
    p.add_argument("--no-fp64", action="store_true",
                   help="skip the float64 reference (FP32 files are then unverified: their gate compares the file's "
                        "error against float64 with upstream FP32's own)")
    p.add_argument("--fp16-safe-norm", action="store_true",
                   help="add the fp16_safe_norm rewrite: norms computed on x/k, exact in FP32, finite in FP16 for 16x "
                        "larger activations (for files a GPU may run in FP16)")
    p.add_argument("--fp16-safe", action="store_true",
                   help="add both FP16 guards, fp16_safe_norm and fp16_safe_attention (Q·Kᵀ finite in FP16 up to "
                        "1.68e7): exact in FP32; for files an FP16 device computes (trained-weight outliers)")
    p.add_argument("--fp16-arm64", action="store_true",
                   help="also run fp16 .pte files on an emulated ARMv8.2-A CPU with FP16 arithmetic (qemu; "
                        "benchmarks/arm64/setup.sh builds it), where this CPU has none: slow, minutes per image "
                        "at full size")
    p.add_argument("--run-gpu", action="store_true",
                   help="also compile each .tflite GPU-only on the LiteRT GPU accelerator (SwiftShader where there is "
                        "no GPU) and compare it with the CPU, on a small re-export when the shape is large")
    p.add_argument("--dynamic-shapes", metavar="HxW,...",
                   help="onnx-dynamic: the shapes it is verified at (default: the export shape, its short side "
                        "squared, and 3/4 of the height one patch wider)")
    p.add_argument("--fast-shaders", action="store_true",
                   help="web targets: Chromium without WebGPU's workgroup-memory zeroing and bounds checks (about 10x "
                        "faster shader compiles on SwiftShader; a pass without them is a pass with them; reported)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the final table and errors")
    p.add_argument("-v", "--verbose", action="store_true", help="show the converters' own logs")
    return p


SKIPPABLE = ("ledger", "verify", "bench", "report", "card")


def published_weights(spec) -> str:
    """The model's published checkpoint (its Hugging Face repo); random for test-only configurations."""
    return spec.hf_repo or spec.official_repo or "random"


def prompt_size(args, spec, parse_size) -> tuple[int, int] | None:
    """--prompt-size for a prompted model (refused for the others)."""
    from ..errors import InputError

    if args.prompt_size and not spec.prompted:
        raise InputError(f"--prompt-size is for models with a prompt input (prompt-da-*); {spec.id} has none")
    return parse_size(args.prompt_size, multiple=1) if args.prompt_size else None


def parse_sizes(text: str) -> tuple[tuple[int, int], ...]:
    """'518x518,392x700' -> ((518, 518), (392, 700)); each a multiple of 14 on both sides."""
    from ..preprocess import parse_size

    return tuple(parse_size(t) for t in text.split(",") if t.strip())


def options_from(args):
    """The typed export options from the parsed arguments; every bad value is refused before any work."""
    from ..core.images import image_set
    from ..errors import InputError
    from ..export.context import StageOptions
    from ..outdir import require_folder
    from ..pipeline import ExportOptions, parse_targets
    from ..preprocess import parse_size
    from ..registry import get_spec
    from ..verify.gates import thresholds

    spec = get_spec(args.model)
    skip = frozenset(s.strip() for s in args.skip.split(",") if s.strip())
    if skip - set(SKIPPABLE):
        raise InputError(f"cannot skip {', '.join(sorted(skip - set(SKIPPABLE)))}; skippable: {', '.join(SKIPPABLE)}")
    stages = StageOptions(images=args.images, threads=args.threads, skip=skip, gates=args.gate, no_fp64=args.no_fp64,
                          no_cache=args.no_cache, evidence_images=args.evidence_images,
                          run_gpu=args.run_gpu, web_fast_shaders=args.fast_shaders, fp16_arm64=args.fp16_arm64,
                          dynamic_shapes=parse_sizes(args.dynamic_shapes) if args.dynamic_shapes else None)
    opts = ExportOptions(model=spec.id, weights=args.weights or published_weights(spec),
                         input_hw=export_size(args, spec.default_hw), out_dir=Path(args.out),
                         targets=parse_targets(args.targets), resize=args.resize,
                         fold_normalization=args.fold_normalization, pos_formula=args.pos_embed,
                         fp16_safe=("norm", "attention") if args.fp16_safe else ("norm",) if args.fp16_safe_norm else (),
                         prompt_hw=prompt_size(args, spec, parse_size), command=args.command_line, stages=stages)
    thresholds(args.gate, spec.metric)
    if args.images:
        _, images = image_set(args.images)
        if spec.prompted:  # every image needs its prompt beside it, of the export's prompt shape: checked now
            from ..core.prompts import prompt_set

            prompt_set(args.images, [name for name, _ in images], opts.prompt_hw or spec.prompt_hw)
    require_folder(opts.out_dir)
    return opts


def run(args) -> int:
    import dataclasses

    from ..pipeline import run_export
    from ..quiet import native_stderr_muted
    from ..registry import get_spec
    from ..weights import WeightsUnavailable
    from .progress import StageProgress

    if args.verbose:
        os.environ["DEPTHPORT_VERBOSE"] = "1"
    opts = options_from(args)
    err = status_console()
    licence_notice(err, opts)
    loosened_note(err, args.gate, get_spec(opts.model).metric)
    if opts.stages.skips("verify"):
        err.print("[yellow]--skip verify: parity is not measured; every file is UNVERIFIED[/]")
    elif args.images:
        images_note(err, args.images)
    live = err.is_terminal and not args.quiet
    with terminate_as_interrupt(), native_stderr_muted(not args.verbose):
        try:
            report = run_export(opts, StageProgress(err) if live else None)
        except WeightsUnavailable as exc:
            if not (args.fallback_random and args.weights is None):
                raise
            err.print(f"[bold red]published weights unavailable, so RANDOM WEIGHTS are used[/]: {exc}", soft_wrap=True)
            report = run_export(dataclasses.replace(opts, weights="random"), StageProgress(err) if live else None)
    summary(report, opts.out_dir)
    return exit_status(report)


def licence_notice(err, opts) -> None:
    """One line naming the licence of non-commercial published weights (random weights carry none)."""
    from ..registry import get_spec

    spec = get_spec(opts.model)
    if spec.non_commercial and opts.weights != "random":
        note = f" ({spec.licence_note})" if spec.licence_note else ""
        err.print(f"[yellow]licence: the {spec.id} weights are {spec.licence}, for non-commercial use only{note}[/]",
                  soft_wrap=True, highlight=False)


def exit_status(report: dict) -> int:
    """0 when every requested target shipped (or is unverified only because a check was skipped on request);
    otherwise 1, with one line per target on stderr naming why."""
    from ..core.schema import SHIPPED, UNVERIFIED, ReportJson, skipped_only

    bad = [a for a in ReportJson(report).artifacts
           if a.status != SHIPPED and not (a.status == UNVERIFIED and skipped_only(a))]
    for art in bad:
        print(f"depthport export: {art.target} ({art.file}) {art.status}: {art.status_reason}", file=sys.stderr)
    return 1 if bad else 0


@contextlib.contextmanager
def terminate_as_interrupt():
    """SIGTERM raises KeyboardInterrupt in the block, so a terminated export cleans up like Ctrl-C."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


SUMMARY_CHECKS = (("parity", "parity"), ("gpu_static", "GPU static"), ("gpu_runtime", "GPU runtime"))


def why(art) -> str:
    """The summary's 'why' of a file: why it did not ship, and why each of its checks not measured was not (a
    shipped file's 'GPU runtime: not measured' had an empty 'why')."""
    from ..core.schema import NOT_MEASURED

    parts = [art.status_reason] if art.status != "shipped" and art.status_reason else []
    for check, label in SUMMARY_CHECKS:
        v = art.verdict(check)
        if v is not None and v.state == NOT_MEASURED and not any(part.startswith(f"{label}:") for part in parts):
            parts.append(f"{label}: {v.reason}")
    return "; ".join(parts)


def summary(data: dict, out_dir: Path) -> None:
    """The final table: each file's status, its verdicts and, when it did not ship, why."""
    from rich.table import Table

    from ..core.report_model import load_report

    report = load_report(data)
    out = console()
    if report.random_weights:
        out.print("[bold red]RANDOM WEIGHTS: these files are for dry runs; their depth means nothing.[/]")
    table = Table(title=f"{report.model} -> {out_dir}")
    for col in ("file", "target", "MB", "ops", "status", "parity", "GPU static", "GPU runtime", "why"):
        table.add_column(col, overflow="fold")
    style = {"shipped": "green", "unverified": "yellow", "not shipped": "red"}
    for a in report.artifacts:
        cells = []
        for check, _ in SUMMARY_CHECKS:
            v = a.verdict(check)
            cells.append("-" if v is None else {"pass": "pass", "fail": "FAIL"}.get(v.state, v.state))
        table.add_row(a.file, a.target, f"{a.bytes / 1e6:.1f}", str(a.op_count if a.op_count is not None else "-"),
                      f"[{style[a.status]}]{a.status}[/]", *cells, why(a))
    out.print(table)
    if report.evidence_budget.line:
        out.print(f"[yellow]{report.evidence_budget.line}[/]")
