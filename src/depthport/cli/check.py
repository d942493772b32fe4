"""`depthport check FILE`: is this .tflite fully delegated to the mobile GPU?"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from depthport.check.verdict import TfliteCheck, check_tflite, rejected_text
from depthport.core.report_model import GpuRuntime, Violation, dump
from depthport.core.schema import SKIPPED
from depthport.core.tflite_graph import TfliteReadError

EXIT_CLEAN, EXIT_NOT_CLEAN, EXIT_NOT_CHECKED = 0, 1, 2
OUTCOMES = {True: ("clean", EXIT_CLEAN), False: ("not clean", EXIT_NOT_CLEAN), None: ("could not check", EXIT_NOT_CHECKED)}
PIPE_WIDTH = 160
OTHER_FILES = {".onnx": "an ONNX model", ".pte": "an ExecuTorch program"}  # what the other exported files are


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `check` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser("check", help="prove a .tflite runs entirely on the mobile GPU",
                                   description=__doc__)
    configure(parser)
    return parser


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `depthport check`."""
    parser.add_argument("file", help=".tflite model to check")
    parser.add_argument("--run-gpu", action="store_true",
                        help="also compile on the real LiteRT GPU accelerator (SwiftShader without a GPU)")
    parser.add_argument("--numeric-file", help="small-shape export of the same model for the numerical run")
    parser.add_argument("--no-compare", action="store_true", help="with --run-gpu: skip the GPU vs CPU run")
    parser.add_argument("--allow-fp16", action="store_true", help="let the GPU compute in FP16 (default FP32)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for the GPU run (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    """Run the check; exit 0 clean, 1 not clean, 2 could not check (bad file, no device, timeout, crash)."""
    try:
        result = check_tflite(args.file, run_gpu=args.run_gpu, numeric_file=args.numeric_file,
                              compare=not args.no_compare, enforce_f32=not args.allow_fp16,
                              timeout=args.timeout, seed=args.seed)
    except TfliteReadError as exc:
        if other := OTHER_FILES.get(Path(args.file).suffix.lower()):  # named as another kind of exported file
            exc = TfliteReadError(f"{other}: check proves that a LiteRT .tflite runs on the mobile GPU; for this file "
                                  "there are depthport verify and depthport bench")
        if args.json:
            print(json.dumps({"file": args.file, "outcome": OUTCOMES[None][0], "error": str(exc)}, indent=2))
        print(f"depthport check: error: {args.file}: {exc}", file=sys.stderr)
        return EXIT_NOT_CHECKED
    outcome, code = OUTCOMES[result.gpu_clean]
    if args.json:
        print(json.dumps(as_json(result, outcome), indent=2))
    else:
        render(result, Console(width=None if sys.stdout.isatty() else PIPE_WIDTH))
    return code


def as_json(result: TfliteCheck, outcome: str) -> dict:
    """What ``--json`` prints: the check's figures, violations, runtime section and verdicts, and the outcome."""
    return {"file": result.file, "gpu_clean": result.gpu_clean, "op_count": result.op_count,
            "op_histogram": result.op_histogram, "max_tensor_rank": result.max_tensor_rank,
            "error_count": result.error_count, "warning_count": result.warning_count,
            "violations": dump(result.violations), "runtime": dump(result.runtime),
            "static": result.static.to_dict(), "runtime_verdict": result.runtime_verdict.to_dict(),
            "verdict": result.verdict.to_dict(), "outcome": outcome}


def render(result: TfliteCheck, console: Console) -> None:
    """Human-readable report: violations table, op summary, runtime verdict."""
    if result.violations:
        console.print(_violation_table(result.violations))
    hist = ", ".join(f"{k} {v}" for k, v in result.op_histogram.items())
    console.print(Text(f"{result.file}: {result.op_count} ops, max rank {result.max_tensor_rank} ({hist})"))
    console.print(Text(f"static: {result.error_count} error(s), {result.warning_count} warning(s) -> "
                       + result.static.text()))
    on_gpu = result.runtime_verdict
    skipped = on_gpu.cause == SKIPPED  # not asked for: its note is the verdict's reason, said once
    console.print(Text(f"runtime: {on_gpu.text()}" if skipped else _runtime_line(result.runtime) + " -> " + on_gpu.text()))
    decided = "the static check" if skipped else "the runtime check"
    style = {True: "green", False: "red", None: "yellow"}[result.gpu_clean]
    label = {True: "GPU clean", False: "NOT GPU clean", None: "GPU verdict not measured"}[result.gpu_clean]
    console.print(Text(f"{label} ({decided} decides): {result.verdict.text()}", style=style))


def _violation_table(violations: tuple[Violation, ...]) -> Table:
    table = Table(title="GPU delegate violations")
    for column in ("#", "op", "tensors", "rule", "detail", "source", "severity"):
        table.add_column(column, overflow="fold", no_wrap=column in ("#", "op", "rule", "severity"))
    for v in violations:
        color = "red" if v.severity == "error" else "yellow"
        table.add_row(str(v.op_index), v.op, Text(v.shapes), v.rule, Text(v.detail), Text(v.source),
                      Text(v.severity, style=color))
    return table


def _runtime_line(runtime: GpuRuntime) -> str:
    status = {True: "fully delegated", False: "NOT fully delegated", None: "no verdict"}[runtime.fully_delegated]
    line = f"runtime: {status}"
    if runtime.rejected_ops:
        line += " - rejected: " + rejected_text(runtime)
    if runtime.rel_l2_vs_cpu is not None:
        shape = list(runtime.shape) if runtime.shape is not None else None
        line += f" - rel L2 {runtime.rel_l2_vs_cpu:.2e}, shape {shape} from {runtime.numeric_file}"
    return f"{line} - {runtime.note}"
