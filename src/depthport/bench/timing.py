"""Interleaved latency of several runners, and peak memory of one file measured in a fresh child process.

Method: every runner gets ``warmup`` untimed calls first (a runner that has run already, as verify's runners in
an export have, is warm and gets none); then, round by round, each runner in turn makes
``iters`` timed calls. A timed call is the runner's ``run(x)``: a synchronous invocation plus reading the
output into a numpy array. Median, min and max are over all timed calls (rounds x iters). On a shared machine
the paired ratio (same round) and the CPU time are steadier than the wall-clock medians.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

METHOD = ("interleaved rounds; each runner warmed up first (one that verify ran already is warm), then per round "
          "each runner makes its timed calls in turn; a timed call = synchronous run + output read into numpy; "
          "median/min/max of wall time over all timed calls; cpu_median = process CPU time (all threads) per call")
MEMORY_METHOD = ("peak RSS (Linux VmHWM) of a fresh child process: delta from after importing the runtime to after "
                 "loading the file and running it twice; native allocations and touched file pages included")


@dataclass
class Entry:
    label: str
    runner: object
    x: np.ndarray
    extra: tuple = ()  # the inputs after the image (a prompted model's prompt)
    warm_ms: float | None = None  # the runner ran already (one call took this long): no warm-up calls


def sample_input(shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(tuple(int(d) for d in shape)).astype(np.float32)


def sample_inputs(runner, seed: int = 0) -> tuple[np.ndarray, tuple]:
    """(image, further inputs) of random normal values in the shapes ``runner`` takes."""
    extra = tuple(sample_input(s, seed + 1 + i) for i, s in enumerate(getattr(runner, "extra_shapes", ())))
    return sample_input(runner.input_shape, seed), extra


def runner_entry(label: str, runner, warm_ms: float | None = None) -> Entry:
    """An Entry timing ``runner`` on random inputs of its shapes; ``warm_ms``: it ran already, a call that long."""
    return Entry(label, runner, *sample_inputs(runner), warm_ms=warm_ms)


def paired_ratio(rec: dict, base: dict) -> float:
    """Median over rounds of ``rec``'s round median over ``base``'s (the same round: the same machine load)."""
    return float(np.median(np.asarray(rec["round_medians"]) / np.asarray(base["round_medians"])))


def time_interleaved(entries: list[Entry], rounds: int = 6, warmup: int = 1, iters: int = 1,
                     progress=None, slow_ms: float | None = None, long_ms: float | None = None,
                     long_rounds: int | None = None) -> list[dict]:
    """One record per entry: wall-clock median, min, max (ms) over all timed calls, the process CPU time
    median (all threads; less sensitive to other load on the machine), per-round medians, and ratios to the
    first entry: of median, min and max, and ``paired`` = the median over rounds of the same-round ratio.
    With ``slow_ms``, a warm-up call slower than that makes every round one call per entry instead of ``iters``
    (the record's ``iters`` says which); with ``long_ms``, one slower than that makes ``long_rounds`` rounds instead
    of ``rounds`` (the record's ``rounds``). An entry with ``warm_ms`` gets no warm-up calls (its record's
    ``warmup``: 0, ``warm``: True); its call time counts as a warm-up's for ``slow_ms`` and ``long_ms``."""
    if not entries:
        raise ValueError("nothing to time")
    if rounds < 1 or iters < 1 or warmup < 0:
        raise ValueError("rounds and iters must be >= 1, warmup >= 0")
    slowest = 0.0
    for e in entries:
        if e.warm_ms is not None:
            slowest = max(slowest, e.warm_ms)
            continue
        for _ in range(warmup):
            t0 = time.perf_counter()
            np.asarray(e.runner.run(e.x, *e.extra))
            slowest = max(slowest, (time.perf_counter() - t0) * 1e3)
    if slow_ms is not None and slowest > slow_ms:
        iters = 1
    if long_ms is not None and long_rounds is not None and slowest > long_ms:
        rounds = max(1, min(rounds, long_rounds))
    wall = np.zeros((len(entries), rounds, iters))
    cpu = np.zeros_like(wall)
    for r in range(rounds):
        if progress:
            progress(f"round {r + 1}/{rounds}")
        for i, e in enumerate(entries):
            for k in range(iters):
                c0, t0 = time.process_time(), time.perf_counter()
                np.asarray(e.runner.run(e.x, *e.extra))
                wall[i, r, k], cpu[i, r, k] = time.perf_counter() - t0, time.process_time() - c0
    wall, cpu = wall * 1e3, cpu * 1e3
    per_round = np.median(wall, axis=2)
    records = []
    for i, e in enumerate(entries):
        records.append({
            "label": e.label, "runtime": getattr(e.runner, "runtime", "?"), "median": float(np.median(wall[i])),
            "min": float(wall[i].min()), "max": float(wall[i].max()), "cpu_median": float(np.median(cpu[i])),
            "round_medians": [float(v) for v in per_round[i]], "rounds": rounds, "iters": iters,
            "warmup": warmup if e.warm_ms is None else 0, **({"warm": True} if e.warm_ms is not None else {}),
        })
    first = records[0]
    for i, rec in enumerate(records):
        rec["ratio"] = {k: rec[k] / first[k] for k in ("median", "min", "max", "cpu_median")}
        rec["ratio"]["paired"] = paired_ratio(rec, first)
    return records


def _peak_rss_kb() -> int:
    """This process's peak RSS in kB. VmHWM is reset by exec; ru_maxrss (the fallback) is inherited over fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _memory_child(path: str, threads: int, options: dict) -> None:
    from depthport.quiet import native_stderr_muted
    from depthport.runtimes.base import load_runner, runner_class

    cls = runner_class(Path(path).suffix)
    if cls is not None:  # the runtime's Python modules are imported before the baseline: the delta is the model's
        cls.import_library()
    before = _peak_rss_kb()
    with native_stderr_muted():
        runner = load_runner(path, threads=threads, **options)
        x, extra = sample_inputs(runner)
        runner.run(x, *extra)
        runner.run(x, *extra)
    peak = _peak_rss_kb()
    print(json.dumps({"peak_rss_mb": peak / 1024, "delta_mb": (peak - before) / 1024}))


def peak_memory(path: str | Path, threads: int = 2, timeout: float = 900, **options) -> dict:
    """{"peak_rss_mb", "delta_mb"} of loading and running ``path`` in a child process (see MEMORY_METHOD)."""
    if not Path(path).is_file():
        return {"error": f"model file not found: {path}"}
    code = ("from depthport.bench.timing import _memory_child; "
            f"_memory_child({str(Path(path))!r}, {int(threads)}, {options!r})")
    return child_json(code, timeout)


def child_json(code: str, timeout: float, what: str = "child") -> dict:
    """Run ``code`` in a fresh Python process: the last stdout line that starts with "{", parsed, or
    {"error": ...} with the exit status and the last line of stderr when there is none or the child failed."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"{what} exited {proc.returncode}: {tail}"}
    return json.loads(lines[-1])
