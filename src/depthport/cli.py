"""The `depthport` command line: models | export | predict | check | verify | bench | card."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from pathlib import Path

from . import quiet  # noqa: F401  (sets native log levels before any runtime loads)
from .argtypes import thread_count
from .preprocess import InputError, parse_size, size_from_aspect
from .runtimes.litert_gpu import add_accelerator_args

# Subcommands that live beside their area; each module has add_parser(subparsers) and run(args) -> int.
EXTENSIONS = ["depthport.check.cli", "depthport.verify.cli", "depthport.bench.cli", "depthport.report.card_cli"]


def console(stderr: bool = False):
    """A rich console; 160 columns when not on a terminal, so piped tables are not truncated."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160)


def _models(args) -> int:
    from rich.table import Table

    from .registry import MODELS

    table = Table(title="depthport models")
    for col in ("id", "family", "weights licence", "default size", "transformers checkpoint", "official checkpoint"):
        table.add_column(col)
    for spec in MODELS.values():
        if spec.hidden and not args.all:
            continue
        table.add_row(spec.id, spec.family, spec.licence, "x".join(map(str, spec.default_hw)), spec.hf_repo or "-",
                      f"{spec.official_repo}/{spec.official_file}" if spec.official_repo else "-")
    console().print(table)
    return 0


def export_size(args, default_hw: tuple[int, int]) -> tuple[int, int]:
    if args.size and args.long_side:
        raise InputError("give either --size or --long-side/--aspect, not both")
    if args.size:
        return parse_size(args.size)
    if args.long_side:
        return size_from_aspect(args.long_side, args.aspect or "4:3")
    return default_hw


def _export(args) -> int:
    from .outdir import require_folder
    from .pipeline import ExportRequest, command_line, parse_targets, run_export
    from .quiet import native_stderr_muted
    from .registry import get_spec

    if args.verbose:
        os.environ["DEPTHPORT_VERBOSE"] = "1"
    spec = get_spec(args.model)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    req = ExportRequest(args.model, args.weights, export_size(args, spec.default_hw), Path(args.out),
                        parse_targets(args.targets), args.resize, args.fold_normalization, args.pos_embed,
                        command_line(), fp16_safe_norm=args.fp16_safe_norm,
                        options={"images": args.images, "threads": args.threads, "skip": skip,
                                 "gates": args.gate, "no_fp64": args.no_fp64, "run_gpu": args.run_gpu})
    from .verify.gates import thresholds
    from .verify.images import image_set

    thresholds(args.gate)
    if args.images:
        image_set(args.images)
    require_folder(req.out_dir)
    if "verify" in skip:
        console(stderr=True).print("[yellow]--skip verify: parity is not measured; every file is UNVERIFIED[/]")
    with terminate_as_interrupt(), console(stderr=True).status("exporting") as status, \
            native_stderr_muted(not args.verbose):
        report = run_export(req, progress=lambda msg: status.update(msg))
    _summary(report, req.out_dir)
    return export_exit_status(report)


def export_exit_status(report: dict) -> int:
    """0 when every requested target shipped (or is unverified only because a check was skipped on request);
    otherwise 1, with one line per target on stderr naming why."""
    from .report.schema import SHIPPED, UNVERIFIED, skipped_only

    bad = [a for a in report["artifacts"]
           if a["status"] != SHIPPED and not (a["status"] == UNVERIFIED and skipped_only(a))]
    for art in bad:
        print(f"depthport export: {art['target']} ({art['file']}) {art['status']}: {art['status_reason']}",
              file=sys.stderr)
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


def _summary(report: dict, out_dir: Path) -> None:
    from rich.table import Table

    from .report.schema import verdict_of

    out = console()
    if report.get("random_weights"):
        out.print("[bold red]RANDOM WEIGHTS: these files are for dry runs; their depth means nothing.[/]")
    table = Table(title=f"{report['model']} -> {out_dir}")
    for col in ("file", "target", "MB", "ops", "status", "parity", "GPU static", "GPU runtime", "why"):
        table.add_column(col, overflow="fold")
    style = {"shipped": "green", "unverified": "yellow", "not shipped": "red"}
    for a in report["artifacts"]:
        cells = []
        for check in ("parity", "gpu_static", "gpu_runtime"):
            v = verdict_of(a, check)
            cells.append("-" if v is None else ("pass" if v.ok else v.state.upper() if v.state == "fail" else v.state))
        why = "" if a["status"] == "shipped" else a["status_reason"]
        table.add_row(a["file"], a["target"], f"{a['bytes'] / 1e6:.1f}", str(a.get("op_count", "-")),
                      f"[{style[a['status']]}]{a['status']}[/]", *cells, why)
    out.print(table)


def _predict(args) -> int:
    from .predict import export_report, predict
    from .quiet import native_stderr_muted

    from .runtimes.litert_gpu import accelerator_options

    accel = accelerator_options(args)
    with native_stderr_muted(not args.verbose):
        depth = predict(args.file, args.image, args.output, args.npy, letterbox=args.letterbox, threads=args.threads,
                        **accel)
    console().print(f"wrote {args.output}" + (f" and {args.npy}" if args.npy else "")
                    + f": depth {depth.shape[0]}x{depth.shape[1]}, range {depth.min():.4g}..{depth.max():.4g}")
    if export_report(Path(args.file)).get("random_weights"):
        console(stderr=True).print("[bold red]RANDOM WEIGHTS: this file was exported from random weights; "
                                   "its depth means nothing[/]")
    return 0


def build_parser() -> tuple[argparse.ArgumentParser, dict]:
    parser = argparse.ArgumentParser(prog="depthport", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    handlers = {}

    p = sub.add_parser("models", help="list supported model ids and their licences")
    p.add_argument("--all", action="store_true", help="include test-only configurations")
    handlers["models"] = _models

    p = sub.add_parser("export", help="export a model to on-device files with a report")
    p.add_argument("model", help="model id (see `depthport models`)")
    p.add_argument("--weights", default="random", help="random | PATH (.pth, .safetensors, folder) | HF repo id")
    p.add_argument("--size", help="export shape HxW, both multiples of 14 (default: the model's)")
    p.add_argument("--long-side", type=int, help="long side in pixels, with --aspect")
    p.add_argument("--aspect", help="W:H aspect for --long-side (e.g. 4:3, 9:16)")
    p.add_argument("--targets", default="litert-fp32", help="comma-separated export targets")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--resize", choices=["exact", "approx"], default="exact",
                   help="exact: align_corners=True as band matrices; approx: GPU-native align_corners=False")
    p.add_argument("--fold-normalization", action="store_true", help="fold ImageNet mean/std in; input RGB 0..1")
    p.add_argument("--pos-embed", choices=["official", "transformers"],
                   help="position-embedding resampling formula (default: the checkpoint source's)")
    p.add_argument("--images", help="folder of images for parity checks (default: scikit-image's natural images)")
    p.add_argument("--threads", type=thread_count, default=2, help="CPU threads for verification and timing")
    p.add_argument("--skip", default="", help="comma-separated steps to skip: ledger, verify, bench, report, card")
    p.add_argument("--gate", action="append", default=[], metavar="PRECISION.METRIC=VALUE",
                   help="override a parity gate, e.g. fp32.pearson=0.9999 or int8.delta125=0.99 (repeatable)")
    p.add_argument("--no-fp64", action="store_true",
                   help="skip the float64 reference (FP32 files are then unverified: their gate compares the file's "
                        "error against float64 with upstream FP32's own)")
    p.add_argument("--fp16-safe-norm", action="store_true",
                   help="add the fp16_safe_norm rewrite: norms computed on x/k, exact in FP32, finite in FP16 for 16x "
                        "larger activations (for files a GPU may run in FP16)")
    p.add_argument("--run-gpu", action="store_true",
                   help="also compile each .tflite GPU-only on the LiteRT GPU accelerator (SwiftShader where there is "
                        "no GPU) and compare it with the CPU, on a small re-export when the shape is large")
    p.add_argument("-v", "--verbose", action="store_true", help="show the converters' own logs")
    handlers["export"] = _export

    p = sub.add_parser("predict", help="run an exported file on an image and write a colourised depth PNG")
    p.add_argument("file", help="exported model (.tflite, .pte, .onnx)")
    p.add_argument("image")
    p.add_argument("-o", "--output", default="depth.png")
    p.add_argument("--npy", help="also write the raw depth as .npy")
    p.add_argument("--letterbox", action="store_true", help="pad to the model's aspect instead of stretching")
    p.add_argument("--threads", type=thread_count, default=2, help="CPU threads (at least 1)")
    add_accelerator_args(p)
    p.add_argument("-v", "--verbose", action="store_true")
    handlers["predict"] = _predict

    for name in EXTENSIONS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue
            raise
        sp = module.add_parser(sub)
        handlers[sp.prog.split()[-1]] = module.run
    return parser, handlers


def _known_errors() -> tuple[type[BaseException], ...]:
    from .weights import WeightsError

    from .report.schema import ReportError

    errors: list[type[BaseException]] = [InputError, WeightsError, FileNotFoundError, ReportError,
                                         # OS errors on paths the user gave (an output under a file, a folder
                                         # given as a file, a folder that may not be written)
                                         PermissionError, NotADirectoryError, IsADirectoryError]
    try:
        from .check.tflite_graph import TfliteReadError

        errors.append(TfliteReadError)
    except ImportError:
        pass
    return tuple(errors)


def main(argv: list[str] | None = None) -> int:
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(handlers[args.command](args) or 0)
    except _known_errors() as exc:
        if args.debug:
            raise
        print(f"depthport {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"depthport {args.command}: interrupted; nothing was written", file=sys.stderr)
        return 130


def entry() -> None:
    """The console script: main(), then the process exits without the runtimes' teardown log lines."""
    code = main()
    if not os.environ.get("DEPTHPORT_VERBOSE"):
        quiet.mute_native_stderr_for_exit()
    sys.exit(code)


if __name__ == "__main__":
    entry()
