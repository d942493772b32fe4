"""`depthport verify FILE... --reference MODEL --weights W`: parity, accuracy and gates, written as a report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core.schema import ArtifactJson, ReportJson
from ..errors import InputError, MissingDependency
from . import verify_web
from .common import (add_evidence_args, check_prompt_input, images_note, loosened_note, model_file_missing,
                     status_console, thread_count)


def add_parser(subparsers):
    p = subparsers.add_parser("verify", help="compare exported files with the upstream PyTorch model")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="exported model(s) (.tflite, .pte, .onnx), same shape; or one web folder (--targets web)")
    p.add_argument("--reference", metavar="MODEL", help="model id (default: from report.json beside FILE)")
    p.add_argument("--weights", help="random | PATH | HF repo id (default: from report.json beside FILE)")
    p.add_argument("--images", help="a folder of images, one image, or a quoted pattern ('photos/**/*': subfolders "
                                    "too), read as predict reads them (default: scikit-image's bundled natural images)")
    p.add_argument("--size", help="reference shape HxW (default: the file's input shape; must match it)")
    p.add_argument("--precision", choices=["fp32", "fp16", "int8"], help="gate to apply (default: from report.json)")
    p.add_argument("--gate", action="append", default=[], metavar="PREC.METRIC=VALUE",
                   help="override a threshold, e.g. fp32.pearson=0.9999 (repeatable)")
    p.add_argument("--threads", type=thread_count, default=2, help="CPU threads (at least 1)")
    p.add_argument("--fp16-arm64", action="store_true",
                   help="also run fp16 .pte files on an emulated ARMv8.2-A CPU with FP16 arithmetic (qemu; "
                        "benchmarks/arm64/setup.sh builds it), where this CPU has none")
    p.add_argument("--out", help="folder for report.json and report.html (default: verify-STEM beside FILE)")
    p.add_argument("--no-eager", action="store_true", help="skip the comparison with depthport's own eager model")
    add_evidence_args(p)
    p.add_argument("--no-fp64", action="store_true",
                   help="skip the upstream model in float64 (used by default for FP32 files, whose gate compares their "
                        "error against float64 with upstream FP32's own; without it they are unverified)")
    p.add_argument("--backends", default="wasm,webgpu-fp32,webgpu-fp16",
                   help="web folder: the page's backends to run in headless Chromium (default: all three)")
    p.add_argument("--fast-shaders", action="store_true",
                   help="web folder: Chromium without WebGPU's workgroup-memory zeroing and bounds checks (about 10x "
                        "faster shader compiles on SwiftShader; a pass without them is a pass with them; reported)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def sibling_report(path: Path) -> ReportJson:
    """The export's report.json for a file in an export folder (or its not-shipped/ subfolder); empty when there
    is none."""
    for folder in (path.parent, path.parent.parent):
        candidate = folder / "report.json"
        if candidate.is_file():
            try:
                report = ReportJson(json.loads(candidate.read_text()))
            except json.JSONDecodeError:
                return ReportJson({})
            if report.artifact(path.name) is not None:
                return report
    return ReportJson({})


def artifact_info(report: ReportJson, path: Path) -> ArtifactJson:
    """The entry of ``path`` in its export's report; empty when there is none."""
    return report.artifact(path.name) or ArtifactJson({})


def run(args) -> int:
    from rich.console import Console

    from ..build import build
    from ..check import stage as check_stage
    from ..core.evidence_budget import evidence_budget
    from ..atomic import atomic_paths
    from ..core.schema import PASS, dumps
    from ..export.context import ExportContext, StageOptions
    from ..outdir import require_verify_folder
    from ..preprocess import parse_size
    from ..quiet import native_stderr_muted
    from ..registry import get_spec
    from ..report.header import new_report
    from ..report.html import render
    from ..rewrites import default_rewrites
    from ..runtimes import load_runner
    from ..runtimes.base import SUFFIXES
    from ..runtimes.validate import folder_given
    from ..web.folder import CONFIG
    from ..verify import gates
    from ..verify import stage as verify_stage
    from ..verify.parity import check_shapes

    paths = [Path(f) for f in args.files]
    for path in paths:  # an export's folder with its model files, not a web export's: name the files
        if path.is_dir() and not (path / CONFIG).exists() and any(f.suffix in SUFFIXES for f in path.iterdir()):
            raise folder_given(path)
    if any(p.is_dir() and p.suffix not in SUFFIXES for p in paths):  # a web export: its page in Chromium
        return verify_web.run_web(args, paths)
    for path in paths:
        if not path.is_file():
            raise model_file_missing(str(path))
    out = Path(args.out) if args.out else paths[0].parent / f"verify-{paths[0].stem}"
    require_verify_folder(out)
    if args.images:
        images_note(status_console(), args.images)
    info = sibling_report(paths[0])
    model_id = args.reference or info.model
    if not model_id:
        raise InputError("no --reference MODEL given and no report.json beside the file says which model it is")
    weights = args.weights or info.weights
    if not weights:
        raise InputError("no --weights given and no report.json beside the file names them")
    spec = get_spec(model_id)
    gates.thresholds(args.gate, spec.metric)  # a bad --gate fails before any work
    threads = args.threads
    console = Console(stderr=True)
    loosened_note(console, args.gate, spec.metric)
    with console.status("verifying") as status, native_stderr_muted(not args.verbose):
        first = load_runner(paths[0], threads=threads)
        shape, extra = tuple(first.input_shape), tuple(getattr(first, "extra_shapes", ()))
        del first  # torn down here, its runtime's teardown lines muted, not when the command returns
        input_hw = parse_size(args.size) if args.size else tuple(shape[-2:])
        check_prompt_input(spec, f"{paths[0].name} takes {1 + len(extra)} input(s)", bool(extra))
        for path in paths:
            check_shapes(load_runner(path, threads=threads), input_hw, path.name)
        rewrites = info.rewrites or default_rewrites()
        status.update(f"building {spec.id} at {input_hw[0]}x{input_hw[1]}")
        built = build(spec, input_hw, weights, rewrites=rewrites, pos_formula=info.pos_embed_formula,
                      prompt_hw=tuple(extra[0][-2:]) if extra else None)
        options = StageOptions(images=args.images, threads=threads, gates=args.gate, no_fp64=args.no_fp64,
                               no_cache=args.no_cache, fp16_arm64=args.fp16_arm64,
                               evidence_images=args.evidence_images, eager=not args.no_eager)
        ctx = ExportContext(built, Path("."), spec.id.replace("-", "_"), options=options,
                            progress=StatusDetail(status), in_place=True)
        budget = evidence_budget(built.parameter_count, input_hw, len(ctx.verification_set()[1]), args.evidence_images)
        report = ReportJson(new_report(spec, built, args.command_line, evidence_budget=budget.as_entry()))
        for path in paths:
            art = report.add(file_entry(path, artifact_info(sibling_report(path), path), args.precision, input_hw))
            if path.suffix == ".pte" and art.precision == "fp16":
                status.update(f"predicting XNNPACK's FP16 arithmetic for {path.name}")
                check_stage.fp16_arithmetic(ctx, art)
        try:
            verify_stage.apply(ctx, report.data)
        except ModuleNotFoundError as exc:
            raise MissingDependency(exc.name or "?", f"the upstream reference of {spec.id}") from None
    html = render(report.data, ctx.figures)  # before either is written: a Ctrl-C in it left a new .json, an old .html
    with atomic_paths(out / "report.json", out / "report.html") as (json_file, html_file):
        json_file.write_text(dumps(report))
        html_file.write_text(html, encoding="utf-8")
    print_summary(report.data, out)
    return 0 if all(v.state == PASS for a in report.artifacts for v in a.required().values()) else 1


def file_entry(path: Path, known: ArtifactJson, precision: str | None, input_hw: tuple[int, int]) -> ArtifactJson:
    """One user file's report entry: its precision (``--precision``, else its export's report), target and size;
    the GPU check its export recorded travels with it."""
    art = ArtifactJson({})
    art.update(file=str(path), target=known.target or path.suffix.lstrip("."), precision=precision or known.precision,
               bytes=path.stat().st_size, input_shape=[1, 3, *input_hw])
    if known.gpu_check is not None:
        art.gpu_check = known.gpu_check
    return art


class StatusDetail:
    """The verify stage's progress lines, shown in the command's status spinner."""

    def __init__(self, status):
        self.status = status

    def detail(self, text: str, done: int | None = None, total: int | None = None) -> None:
        self.status.update(f"verifying {text}")


def print_summary(data: dict, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..core.formatting import fmt
    from ..core.report_model import Parity, load_report

    report = load_report(data)
    console = Console(width=None if sys.stdout.isatty() else 160)
    if report.random_weights:
        console.print("[bold red]RANDOM WEIGHTS: reference and files are random; parity tests the conversion only.[/]")
    count = len(report.verify.images)
    table = Table(title=f"parity vs {report.verify.reference} ({count} image{'s' if count != 1 else ''})")
    for col in ("file", "precision", "corr worst", "corr median", "rel L2 pooled", "max abs", "δ1.25 worst",
                "vs eager rel L2", "vs fp64 rel L2", "AbsRel", "gate"):
        table.add_column(col)
    for a in report.artifacts:
        name, precision, verdict = Path(a.file).name, a.precision or "?", a.verdict("parity").text()
        p = a.measured_parity
        if p is None:  # the file did not run: its verdict says why
            table.add_row(name, precision, *["-"] * 8, verdict)
            continue
        extra = [v.rel_l2_pooled if isinstance(v, Parity) else None for v in (p.vs_eager, p.vs_reference_fp64)]
        table.add_row(name, precision, f"{p.pearson_worst:.7f}", f"{p.pearson_median:.7f}",
                      f"{p.rel_l2_pooled:.3e}", f"{p.max_abs:.3e}", f"{p.delta125_worst:.5f}",
                      *(fmt(v, ".3e") for v in extra), fmt(a.accuracy.abs_rel if a.accuracy else None, ".4f"), verdict)
    console.print(table)
    for a in report.artifacts:
        if a.measured_parity is None:
            console.print(f"{Path(a.file).name}: {a.verdict('parity').text()}", soft_wrap=True)
        check = a.verdict("fp16_arithmetic")
        if check is not None:
            console.print(f"{Path(a.file).name} on FP16 arithmetic: {check.text()}")
    if report.evidence_budget.line:
        console.print(f"[yellow]{report.evidence_budget.line}[/]")
    console.print(f"wrote {out / 'report.json'} and {out / 'report.html'}")
