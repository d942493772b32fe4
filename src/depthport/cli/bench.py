"""`depthport bench FILE...`: interleaved CPU latency (and peak memory) of exported files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..bench.probe import SPECS
from ..errors import InputError
from ..outdir import check_output_file
from .common import accelerator_options, add_accelerator_args, model_file_missing, thread_count

PROFILED = (".tflite", ".pte", ".onnx")  # what --profile takes, each profiled by its own runtime


def add_parser(subparsers):
    p = subparsers.add_parser("bench", help="time exported files against each other, interleaved")
    p.add_argument("files", nargs="*", metavar="FILE", help="exported models (.tflite, .pte, .onnx)")
    p.add_argument("--threads", type=thread_count, default=2, help="CPU threads for every runtime")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2, help="untimed calls per file before the first round")
    p.add_argument("--iters", type=int, default=3, help="timed calls per file per round")
    p.add_argument("--api", choices=["compiled", "interpreter", "both"], default="compiled",
                   help="LiteRT Python API for .tflite files")
    p.add_argument("--torch", metavar="MODEL", help="also time the upstream PyTorch model (e.g. transformers) eagerly")
    p.add_argument("--weights", default="random", help="weights for --torch")
    p.add_argument("--size", help="input HxW for --torch (default: the first file's)")
    p.add_argument("--no-memory", action="store_true", help="skip the per-file peak-memory child processes")
    p.add_argument("--json", help="also write the results to this JSON file")
    p.add_argument("--no-probe", action="store_true",
                   help="skip the GEMM probe (then no %% of peak and no INT8 gain)")
    p.add_argument("--probe-size", choices=sorted(SPECS), default="full",
                   help="GEMM probe chain: full = 16 FC 384<->1536 on 1814 tokens; small = 4 of them")
    p.add_argument("--profile", metavar="FILE",
                   help="print the runtime's own per-op profile of this .tflite (LiteRT), .pte (ExecuTorch ETDump) or "
                        ".onnx (onnxruntime) on the CPU: time per op type, GMAC/s per MAC op type, top 10 ops")
    p.add_argument("--profile-runs", type=int, default=5, help="profiled calls for --profile (after 2 warm-ups)")
    add_accelerator_args(p)
    return p


def entries_for(args) -> list:
    from ..bench.timing import runner_entry
    from ..runtimes import load_runner

    entries = []
    accel = accelerator_options(args)
    if args.accelerator == "gpu" and args.api != "compiled":
        raise InputError("--accelerator gpu times the CompiledModel API only (--api compiled)")
    apis = ["compiled", "interpreter"] if args.api == "both" else [args.api]
    for f in args.files:
        path = Path(f)
        if not path.exists():
            raise model_file_missing(f)
        for api in (apis if path.suffix == ".tflite" else [None]):
            runner = load_runner(path, threads=args.threads, **({"api": api} if api else {}), **accel)
            label = path.name + (f" [{api}]" if args.api == "both" and api else "")
            entries.append(runner_entry(label, runner))
    if args.torch:
        entries.append(torch_entry(args, entries))
    return entries


def torch_entry(args, entries):
    from ..bench.timing import Entry, sample_input
    from ..build import resolve_weights
    from ..preprocess import parse_size
    from ..reference import reference_model
    from ..registry import image_only_spec
    from ..runtimes.torch import TorchRunner

    if args.size:
        hw = parse_size(args.size)
    elif entries:
        hw = tuple(entries[0].runner.input_shape[-2:])
    else:
        raise InputError("--torch without files needs --size HxW")
    spec = image_only_spec(args.torch, "bench --torch")
    runner = TorchRunner(reference_model(spec, resolve_weights(spec, args.weights)), hw, args.threads,
                         "torch-eager")
    return Entry(f"torch eager ({spec.id}, upstream)", runner, sample_input(runner.input_shape))


def run(args) -> int:
    from rich.console import Console

    from ..bench import roofline
    from ..bench.probe import probe_entries, summarize
    from ..bench.timing import MEMORY_METHOD, METHOD, peak_memory, time_interleaved
    from ..core.machine import describe, machine_info
    from ..core.provenance import versions
    from ..quiet import native_stderr_muted

    if not args.files and not args.torch and not args.profile:
        raise InputError("nothing to time: give FILE(s) and/or --torch MODEL (or --profile FILE)")
    if args.threads < 1 or args.rounds < 1 or args.iters < 1 or args.warmup < 0 or args.profile_runs < 1:
        raise InputError("--threads, --rounds, --iters and --profile-runs must be >= 1 and --warmup >= 0")
    if args.json:
        check_output_file(args.json, "--json", "bench.json")
    if args.profile and Path(args.profile).suffix not in PROFILED:
        raise InputError(f"--profile takes a {', '.join(PROFILED)} file, not {Path(args.profile).name}")
    if not args.files and not args.torch:
        return 1 if "error" in run_profile(args, None) else 0
    console = Console(stderr=True)
    spec = None if args.no_probe or args.accelerator != "cpu" else SPECS[args.probe_size]
    with console.status("loading") as status, native_stderr_muted():
        entries = entries_for(args)
        n_files = len(entries)
        if spec is not None:
            status.update(f"GEMM probe: {spec.describe()} (built once, then cached)")
            entries += probe_entries(spec, args.threads)
        records = time_interleaved(entries, args.rounds, args.warmup, args.iters,
                                   progress=lambda msg: status.update(f"timing: {msg}"))
        records, probe = records[:n_files], summarize(spec, records[n_files:], args.threads) if spec else None
        cache: dict = {}
        for entry, rec in zip(entries, records):
            rec.update(roofline.figures(roofline.entry_macs(entry, cache), rec["median"], probe))
        memory = {}
        if not args.no_memory and args.accelerator == "cpu":
            for f in dict.fromkeys(args.files):
                status.update(f"peak memory of {Path(f).name}")
                memory[Path(f).name] = peak_memory(f, args.threads)
    machine = machine_info(args.threads)
    for rec in records:
        rec["memory"] = memory.get(rec["label"].split(" [")[0])
        rec["cpu"] = describe(machine)
    result = {"threads": args.threads, "accelerator": args.accelerator,
              "gpu_precision": args.gpu_precision if args.accelerator == "gpu" else None,
              "method": METHOD, "memory_method": MEMORY_METHOD, "roofline_method": roofline.METHOD,
              "probe": probe or {"skipped": "--no-probe" if args.no_probe else "the probe times the CPU only"},
              "results": records, "machine": machine, "versions": versions()}
    print_table(result)
    if args.profile:
        result["profile"] = run_profile(args, probe)
    if args.json:
        from ..atomic import write_text

        write_text(args.json, json.dumps(result, indent=2) + "\n")
    return 0


def print_table(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    recs = result["results"]
    r0 = recs[0]
    where = (f"GPU ({result['gpu_precision']} compute)" if result.get("accelerator") == "gpu"
             else f"{result['threads']} threads")
    from ..bench.roofline import probe_lines
    from ..core.formatting import fmt
    from ..core.machine import describe
    from ..core.report_model import Machine, load

    table = Table(title=f"latency, {where}, {r0['rounds']} rounds x {r0['iters']} calls "
                        f"after {r0['warmup']} warm-ups (ms)", caption=describe(result["machine"]))
    for col in ("file", "runtime", "median", "min", "max", "CPU ms", "x first", "x paired", "GMAC", "GMAC/s",
                "% of peak", "peak RSS MB", "RSS delta MB"):
        table.add_column(col)
    for rec in recs:
        mem = rec.get("memory") or {}
        pct = fmt(rec.get("pct_of_peak"), ".1f")
        if rec.get("pct_of_mixed_peak") is not None:
            pct += f" (mixed {rec['pct_of_mixed_peak']:.0f})"
        table.add_row(rec["label"], rec["runtime"], f"{rec['median']:.2f}", f"{rec['min']:.2f}", f"{rec['max']:.2f}",
                      f"{rec['cpu_median']:.2f}", f"{rec['ratio']['median']:.3f}", f"{rec['ratio']['paired']:.3f}",
                      fmt(rec.get("gmac"), ".3g", "n/c"), fmt(rec.get("gmac_per_s"), ".1f"), pct,
                      f"{mem['peak_rss_mb']:.0f}" if "peak_rss_mb" in mem else mem.get("error", "-"),
                      f"{mem['delta_mb']:.0f}" if "delta_mb" in mem else "-")
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(f"machine: {describe(result['machine'])}")
    console.print(table)
    console.print(f"x first: median / median of {r0['label']}; x paired: median over rounds of the same-round ratio")
    for rec in recs:
        if not (rec.get("macs") or {}).get("counted", True):
            console.print(f"GMAC n/c (not counted) for {rec['label']}: {rec['macs'].get('reason')}")
    for line in probe_lines(result.get("probe")) or [f"no GEMM probe: {result['probe'].get('skipped')}"]:
        console.print(line)
    if any(rec.get("pct_of_mixed_peak") is not None for rec in recs):
        console.print("mixed: % of the peak when every MAC runs at its own precision's probe chain (FP32 / INT8)")
    m, v = load(Machine, result["machine"]), result["versions"]
    console.print(f"{m.cpu}, {m.cores} cores, {m.os}")
    console.print(", ".join(f"{k} {val}" for k, val in v.items()))


def run_profile(args, probe: dict | None) -> dict:
    """``--profile FILE``: the runtime's op profile of FILE; prints it, returns it (under "profile" in --json)."""
    from rich.console import Console

    from ..bench.macs import count_macs
    from ..bench.profile import mac_rates, print_profile
    from ..bench.profile_runtimes import profile_file
    from ..core.machine import machine_info
    from ..core.report_model import Probe, load

    if not Path(args.profile).is_file():
        raise InputError(f"model file not found: {args.profile}")
    with Console(stderr=True).status(f"profiling {Path(args.profile).name}"):
        prof = profile_file(args.profile, threads=args.threads, runs=args.profile_runs)
    if "error" not in prof:
        peak = load(Probe, probe).peak_gmac_per_s if probe else None
        prof["mac_ops"] = mac_rates(prof, count_macs(args.profile), peak)
        prof["machine"] = machine_info(args.threads)
    print_profile(prof)
    if args.json and not (args.files or args.torch):
        from ..atomic import write_text

        write_text(args.json, json.dumps({"profile": prof}, indent=2) + "\n")
    return prof
