"""bench: a short interleaved latency run of every artifact on the CPU, with the roofline figures.

A file verify has run is timed on verify's runner (``ExportContext.warm_runners``): warm, not loaded again (for
prompt-da-large at 756x1008, a load and a warm-up call took 34 s on 2 cores of an AMD Zen 4).

Beside each latency: GMAC counted from the file's graph, GMAC/s and % of this machine's FP32 GEMM peak, measured
by the small GEMM probe (``bench.probe.SMALL``: 4 FULLY_CONNECTED 384<->1536 on 1814 tokens, FP32 only, to keep
the export fast; ``depthport bench`` runs the full 16-layer chain and the INT8 chains) timed in the same rounds.
``ctx.options.probe = False`` skips the probe.
"""

from __future__ import annotations

from ..core.machine import describe, machine_info
from ..core.schema import ReportJson, failed_section
from ..errors import InputError, error_text
from ..runtimes import load_runner
from . import roofline
from .probe import SMALL, probe_entries, summarize
from .timing import METHOD, runner_entry, time_interleaved

ROUNDS, ITERS, WARMUP = 3, 2, 1
SLOW_MS = 5000.0  # a file whose warm-up call takes longer is timed once a round (3 calls, not 6)
# A file whose call takes longer than this (a Large model at its default shape on 2 cores: prompt-da-large's 30-35 s)
# is timed in this many rounds: the export's bench is for orientation, and verify has run the file already.
LONG_MS, LONG_ROUNDS = 20000.0, 2


def apply(ctx, report: dict | ReportJson) -> None:
    report = ReportJson(report)
    threads = ctx.options.threads
    entries, timed = [], []
    for art in report.artifacts:
        if art.runnable_here is False:
            continue
        if art.web:  # a browser page: its time per inference is measured in Chromium (verify.browser)
            art.latency_ms = failed_section("a web folder: timed in the browser (see the browser section)", None)
            continue
        runner, warm_ms = ctx.warm_runners.pop(art.target, (None, None))
        if runner is None:
            try:
                runner = load_runner(ctx.out_dir / art.file, threads=threads)
            except (InputError, ModuleNotFoundError, RuntimeError) as exc:
                art.latency_ms = failed_section(error_text(exc), None)
                continue
        entries.append(runner_entry(art.file, runner, warm_ms))
        timed.append(art)
    ctx.warm_runners.clear()
    if not entries:
        return
    n_files, probe_note = len(entries), _add_probe(ctx, entries, threads)
    records = time_interleaved(entries, rounds=ROUNDS, warmup=WARMUP, iters=ITERS, progress=ctx.detail,
                               slow_ms=SLOW_MS, long_ms=LONG_MS, long_rounds=LONG_ROUNDS)
    iters, rounds = records[0]["iters"], records[0]["rounds"]
    probe = summarize(SMALL, records[n_files:], threads) if len(records) > n_files else None
    machine = machine_info(threads)
    cache: dict = {}
    for art, entry, rec in zip(timed, entries, records):
        figures = roofline.figures(roofline.entry_macs(entry, cache), rec["median"], probe)
        art.latency_ms = {"runtime": rec["runtime"], "threads": threads, "median": rec["median"],
                          "min": rec["min"], "max": rec["max"], "rounds": rounds, "iters": iters,
                          "warmup": rec["warmup"], **({"warm_from": "verify"} if rec.get("warm") else {}),
                          "cpu": describe(machine), **figures}
    if probe:
        probe = {**probe, "note": "short probe for the export: the FP32 chain only, 4 layers instead of 16; "
                                  "`depthport bench` runs the full chain and the INT8 chains"}
    report.bench = {"method": METHOD, "threads": threads, "rounds": rounds, "iters": iters, "warmup": WARMUP,
                    "note": "a short run for orientation; use `depthport bench` for figures",
                    "machine": machine, "roofline_method": roofline.METHOD,
                    "probe": probe or {"skipped": probe_note}}


def _add_probe(ctx, entries: list, threads: int) -> str | None:
    """Append the small FP32 GEMM probe to ``entries``; returns why not when it is skipped or fails."""
    if not ctx.options.probe:
        return "the probe was switched off (options.probe)"
    try:
        entries += probe_entries(SMALL, threads, kinds=("fp32",))
    except (RuntimeError, ValueError, OSError, ImportError) as exc:
        return f"probe unavailable: {error_text(exc)}"
    return None
