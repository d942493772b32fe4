"""What a whole export costs: per registered id at its default shape and default targets (and the 6-target
DA-V2-Small matrix), the wall time and peak RSS of every stage.

Each export runs in a child process of its own, so its peak RSS is its own: the child samples the resident set of
itself and the processes below it (its conversion children, ``depthport.export.children``), summed (``/proc``
VmRSS, and the children's anonymous resident memory, every 20 ms), and keeps the largest value seen during each
stage; for the whole export, the largest stage's or its own VmHWM, whichever is larger. Random weights, the stages
``depthport export`` runs by default, an empty reference cache (``verify.reference_cache``): the cost of a first
export.

With ``--warm`` each export runs twice with one cache: the second is a re-export, whose evidence stages read the
cache.

    python benchmarks/export_cost.py [--models da2-small,da3-small] [--matrix] [--warm] [--threads 2]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MATRIX = "litert-fp32,litert-fp16,litert-int8,xnnpack-fp32,xnnpack-fp16,onnx"


def rss_kb(field: str = "VmRSS", pid: str = "self") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:  # the process ended meanwhile
        pass
    return 0


def descendants(pid: str = "self") -> list[str]:
    """Every process below ``pid`` (the export's conversion children and their server)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            found += [kid, *descendants(kid)]
    return found


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@functools.lru_cache(maxsize=1)
def _own_cmdline() -> bytes:
    """This process's command line, read once (the sampler asks every 20 ms)."""
    return _cmdline("self")


def tree_rss_kb() -> int:
    """What this process and every process below it hold at once: its resident set plus the anonymous resident
    memory of each process below it (the file-backed pages they share with it, its libraries, counted once). A child
    with this process's own command line is a fork that has not exec'd yet (a library running a tool): its pages are
    this process's, shared, and not counted again. Read from ``/proc/PID/status``, which is cheap; ``smaps_rollup``
    walks the page tables under the memory map's lock and, read every 20 ms, slowed the export it measured."""
    me = _own_cmdline()
    return rss_kb() + sum(rss_kb("RssAnon", pid=p) for p in descendants() if _cmdline(p) != me)


class StageCost:
    """A progress reporter for ``run_export`` that records each stage's wall time and peak resident set, and the
    same for each step the stage names in its progress (``detail``: counts such as "images 2/6" merged)."""

    def __init__(self, interval: float = 0.02):
        self.rows: list[dict] = []
        self._peak = self._step_peak = 0
        self._step: tuple[str, float] | None = None
        self._steps: dict[str, dict] = {}
        self._stop = threading.Event()
        threading.Thread(target=self._sample, args=(interval,), daemon=True).start()

    def _sample(self, interval: float) -> None:
        while not self._stop.wait(interval):
            rss = tree_rss_kb()
            self._peak, self._step_peak = max(self._peak, rss), max(self._step_peak, rss)

    @contextlib.contextmanager
    def stage(self, name: str):
        self._peak, start = rss_kb(), time.perf_counter()
        first = self._peak
        self._steps = {}
        try:
            yield
        finally:
            self._end_step()
            self._peak = max(self._peak, rss_kb())
            self.rows.append({"stage": name, "s": time.perf_counter() - start, "start_rss_mb": first / 1024,
                              "peak_rss_mb": self._peak / 1024, "steps": list(self._steps.values())})

    def detail(self, text: str, done: int | None = None, total: int | None = None) -> None:
        self._end_step()
        self._step, self._step_peak = (re.sub(r"\d+/\d+|\(\d+/\d+\)", "n/N", text), time.perf_counter()), rss_kb()
        self._step_start = self._step_peak

    def _end_step(self) -> None:
        if self._step is not None:
            name, start = self._step
            row = self._steps.setdefault(name, {"step": name, "s": 0.0, "start_rss_mb": self._step_start / 1024,
                                                "peak_rss_mb": 0.0})
            row["s"] += time.perf_counter() - start
            row["peak_rss_mb"] = max(row["peak_rss_mb"], max(self._step_peak, rss_kb()) / 1024)
            self._step = None

    def close(self) -> None:
        self._stop.set()


def child(model_id: str, targets: str, threads: int) -> None:
    """One export in this process; prints one JSON line."""
    from depthport.pipeline import ExportOptions, StageOptions, parse_targets, run_export
    from depthport.core.report_model import load_report
    from depthport.quiet import native_stderr_muted
    from depthport.registry import get_spec

    spec = get_spec(model_id)
    cost, start = StageCost(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="depthport-cost-") as tmp, native_stderr_muted():
        opts = ExportOptions(model=spec.id, weights="random", input_hw=spec.default_hw, out_dir=Path(tmp) / "out",
                             targets=parse_targets(targets), stages=StageOptions(threads=threads))
        report = load_report(run_export(opts, cost))
    cost.close()
    print(json.dumps({"model": model_id, "size": list(spec.default_hw), "targets": targets,
                      "total_s": time.perf_counter() - start,
                      "peak_rss_mb": max([rss_kb("VmHWM") / 1024] + [r["peak_rss_mb"] for r in cost.rows]),
                      "stages": cost.rows,
                      "status": [[a.status, a.status_reason] for a in report.artifacts],
                      "evidence": report.evidence_budget.line or "every image"}))


def measure(model_id: str, targets: str, threads: int, cache: str | None = None) -> dict:
    """One export in a child process, with an empty evidence cache of its own (a first export's cost), or with the
    cache folder ``cache``."""
    with tempfile.TemporaryDirectory(prefix="depthport-cost-cache-") as empty:
        proc = subprocess.run([sys.executable, __file__, "--child", model_id, "--targets", targets,
                               "--threads", str(threads)], capture_output=True, text=True,
                              env={**os.environ, "DEPTHPORT_CACHE": cache or empty})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:  # the error's last lines, without the runtimes' native log lines
        said = [ln for ln in proc.stderr.strip().splitlines()
                if ln.strip() and not ln.startswith(("INFO:", "W0", "I0"))]
        tail = " | ".join(said[-3:]) or "no output"
        return {"model": model_id, "targets": targets, "error": f"exited {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated ids (default: every registered id but the tiny test configs)")
    ap.add_argument("--targets", default="litert-fp32", help="the targets of each export (default: export's own)")
    ap.add_argument("--matrix", action="store_true", help=f"also DA-V2-Small with {MATRIX}")
    ap.add_argument("--warm", action="store_true",
                    help="export each twice with one evidence cache: a first export, then a re-export (warm cache)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", metavar="ID", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.targets, args.threads)
        return
    from rich.console import Console
    from rich.table import Table

    from depthport.core.machine import describe, machine_info
    from depthport.registry import MODELS

    console = Console(width=200)
    console.print(f"machine: {describe(machine_info(args.threads))}")
    runs = [(i, args.targets) for i in (args.models.split(",") if args.models else
                                        [i for i, s in MODELS.items() if not s.hidden])]
    if args.matrix:
        runs.append(("da2-small", MATRIX))
    table = Table(title="export cost per stage: wall s / peak RSS MiB (random weights)")
    for col in ("model", "shape", "targets", "total", "peak RSS", "stages"):
        table.add_column(col)
    for model_id, targets in runs:
        with tempfile.TemporaryDirectory(prefix="depthport-cost-warm-") as cache:
            kinds = ("first", "warm") if args.warm else ("first",)
            results = []
            for kind in kinds:
                with console.status(f"exporting {model_id} ({targets}, {kind})"):
                    results.append(measure(model_id, targets, args.threads, cache if args.warm else None))
        for kind, r in zip(kinds, results):
            add_row(table, console, r, model_id if kind == "first" else f"{model_id} (re-export, warm cache)")
        if args.warm and not any("error" in r for r in results):
            first, warm = (evidence_s(r) for r in results)
            console.print(f"{model_id}: evidence stages (ledger, check, verify) {first:.1f} s first, {warm:.1f} s "
                          f"warm: {first / warm:.1f}x faster")
    console.print(table)


EVIDENCE = ("rewrite ledger", "check", "verify")


def evidence_s(r: dict) -> float:
    """Seconds spent in the evidence stages of one export."""
    return sum(s["s"] for s in r["stages"] if s["stage"] in EVIDENCE)


def add_row(table, console, r: dict, label: str) -> None:
    if "error" in r:
        table.add_row(label, "-", r["targets"], "-", "-", r["error"])
        return
    stages = "; ".join(f"{s['stage'].split(' at ')[0]} {s['s']:.0f} s / {s['peak_rss_mb']:.0f}" for s in r["stages"])
    table.add_row(label, "x".join(map(str, r["size"])), r["targets"], f"{r['total_s'] / 60:.1f} min",
                  f"{r['peak_rss_mb'] / 1024:.2f} GiB ({r['peak_rss_mb'] * 2**20 / 1e9:.2f} GB)", stages)
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
