"""bench: a short interleaved latency run of every artifact on the CPU."""

from __future__ import annotations

from ..preprocess import InputError
from ..runtimes import load_runner
from ..verify.parity import error_text
from .timing import METHOD, Entry, sample_input, time_interleaved

ROUNDS, ITERS, WARMUP = 3, 2, 1


def apply(ctx, report: dict) -> None:
    if "bench" in ctx.options.get("skip", ()):
        return
    threads = int(ctx.options.get("threads") or 2)
    entries, timed = [], []
    for art in report["artifacts"]:
        if art.get("runnable_here") is False:
            continue
        try:
            runner = load_runner(ctx.out_dir / art["file"], threads=threads)
        except (InputError, ModuleNotFoundError, RuntimeError) as exc:
            art["latency_ms"] = {"error": error_text(exc)}
            continue
        entries.append(Entry(art["file"], runner, sample_input(runner.input_shape)))
        timed.append(art)
    if not entries:
        return
    records = time_interleaved(entries, rounds=ROUNDS, warmup=WARMUP, iters=ITERS)
    for art, rec in zip(timed, records):
        art["latency_ms"] = {"runtime": rec["runtime"], "threads": threads, "median": rec["median"],
                             "min": rec["min"], "max": rec["max"], "rounds": ROUNDS, "iters": ITERS}
    report["bench"] = {"method": METHOD, "threads": threads, "rounds": ROUNDS, "iters": ITERS, "warmup": WARMUP,
                       "note": "a short run for orientation; use `depthport bench` for figures"}
