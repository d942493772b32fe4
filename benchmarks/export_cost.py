"""What a whole export costs: per registered id at its default shape and default targets (and the 6-target
DA-V2-Small matrix), the wall time and peak RSS of every stage.

Each export runs in a child process of its own, so its peak RSS is its own: the child samples its resident set
(``/proc/self/status`` VmRSS, every 20 ms) and keeps the largest value seen during each stage, and VmHWM for the
whole export. Random weights, the stages ``depthport export`` runs by default, an empty reference cache
(``verify.reference_cache``): the cost of a first export.

    python benchmarks/export_cost.py [--models da2-small,da3-small] [--matrix] [--threads 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MATRIX = "litert-fp32,litert-fp16,litert-int8,xnnpack-fp32,xnnpack-fp16,onnx"


def rss_kb(field: str = "VmRSS") -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class StageCost:
    """A progress reporter for ``run_export`` that records each stage's wall time and peak resident set."""

    def __init__(self, interval: float = 0.02):
        self.rows: list[dict] = []
        self._peak = 0
        self._stop = threading.Event()
        threading.Thread(target=self._sample, args=(interval,), daemon=True).start()

    def _sample(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self._peak = max(self._peak, rss_kb())

    @contextlib.contextmanager
    def stage(self, name: str):
        self._peak, start = rss_kb(), time.perf_counter()
        try:
            yield
        finally:
            self._peak = max(self._peak, rss_kb())
            self.rows.append({"stage": name, "s": time.perf_counter() - start, "peak_rss_mb": self._peak / 1024})

    def detail(self, text: str, done: int | None = None, total: int | None = None) -> None:
        pass

    def close(self) -> None:
        self._stop.set()


def child(model_id: str, targets: str, threads: int) -> None:
    """One export in this process; prints one JSON line."""
    from depthport.export.context import StageOptions
    from depthport.pipeline import ExportOptions, parse_targets, run_export
    from depthport.quiet import native_stderr_muted
    from depthport.registry import get_spec

    spec = get_spec(model_id)
    cost, start = StageCost(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="depthport-cost-") as tmp, native_stderr_muted():
        opts = ExportOptions(model=spec.id, weights="random", input_hw=spec.default_hw, out_dir=Path(tmp) / "out",
                             targets=parse_targets(targets), stages=StageOptions(threads=threads))
        report = run_export(opts, cost)
    cost.close()
    print(json.dumps({"model": model_id, "size": list(spec.default_hw), "targets": targets,
                      "total_s": time.perf_counter() - start, "peak_rss_mb": rss_kb("VmHWM") / 1024,
                      "stages": cost.rows, "status": [[a.get("status"), a.get("status_reason")] for a in report["artifacts"]],
                      "evidence": ((report.get("verify") or {}).get("evidence_budget") or {}).get("line", "every image")}))


def measure(model_id: str, targets: str, threads: int) -> dict:
    """One export in a child process, with an empty reference cache of its own (a first export's cost)."""
    with tempfile.TemporaryDirectory(prefix="depthport-cost-cache-") as cache:
        proc = subprocess.run([sys.executable, __file__, "--child", model_id, "--targets", targets,
                               "--threads", str(threads)], capture_output=True, text=True,
                              env={**os.environ, "DEPTHPORT_CACHE": cache})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"model": model_id, "targets": targets, "error": f"exited {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated ids (default: every registered id but the tiny test configs)")
    ap.add_argument("--targets", default="litert-fp32", help="the targets of each export (default: export's own)")
    ap.add_argument("--matrix", action="store_true", help=f"also DA-V2-Small with {MATRIX}")
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
    table = Table(title="export cost per stage: wall s / peak RSS MB (random weights)")
    for col in ("model", "shape", "targets", "total", "peak RSS", "stages"):
        table.add_column(col)
    for model_id, targets in runs:
        with console.status(f"exporting {model_id} ({targets})"):
            r = measure(model_id, targets, args.threads)
        if "error" in r:
            table.add_row(model_id, "-", targets, "-", "-", r["error"])
            continue
        stages = "; ".join(f"{s['stage'].split(' at ')[0]} {s['s']:.0f} s / {s['peak_rss_mb']:.0f}" for s in r["stages"])
        table.add_row(model_id, "x".join(map(str, r["size"])), targets, f"{r['total_s'] / 60:.1f} min",
                      f"{r['peak_rss_mb'] / 1024:.2f} GB", stages)
        console.print(json.dumps(r))
    console.print(table)


if __name__ == "__main__":
    main()
