"""Helpers shared by the benchmark scripts (run them as `python benchmarks/NAME.py`, which puts this folder on
the import path)."""

from __future__ import annotations

import time

from rich.console import Console

from depthport.quiet import native_stderr_muted


def timed(console: Console, label: str, fn):
    """fn() with the converters' native logs muted; prints how long it took."""
    t0 = time.perf_counter()
    with native_stderr_muted():
        out = fn()
    console.print(f"{label}: {time.perf_counter() - t0:.0f} s")
    return out


def time_rounds(console: Console, entries: list, args) -> list[dict]:
    """depthport.bench.time_interleaved over ``entries`` with the timing options of ``add_run_args``; the runtimes'
    native logs muted, the progress shown on the console."""
    from depthport.bench import time_interleaved

    with console.status("timing") as status, native_stderr_muted():
        return time_interleaved(entries, args.rounds, args.warmup, args.iters,
                                progress=lambda msg: status.update(f"timing: {msg}"))


def add_run_args(parser, size: str, work: str, warmup: int, iters: int) -> None:
    """The options every full-size benchmark takes: what to build, where, and how to time it."""
    parser.add_argument("--model", default="da2-small", help="model id (da2-tiny for a dry run)")
    parser.add_argument("--size", default=size)
    parser.add_argument("--weights", default="random")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--iters", type=int, default=iters)
    parser.add_argument("--work", default=work, help="folder for the exported files")
    parser.add_argument("--json", help="write all figures here")


def run_setup(args):
    """(input HxW, model spec, weights, work folder, created if missing) from the options of ``add_run_args``."""
    from pathlib import Path

    from depthport.build import resolve_weights
    from depthport.preprocess import parse_size
    from depthport.registry import get_spec

    spec = get_spec(args.model)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    return parse_size(args.size), spec, resolve_weights(spec, args.weights), work
