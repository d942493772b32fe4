"""Runtime GPU check: compile with the LiteRT GPU accelerator only (no CPU fallback) in a child process.

The child (`depthport.check.gpu_worker`) gets the Vulkan environment (SwiftShader where there is no GPU)
before the accelerator loads, is killed after `timeout` seconds, and cannot take this process down
with it. Which ops the accelerator rejected is read from LiteRT's own log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import depthport
from depthport.core.report_model import GpuRuntime, RejectedOp
from depthport.runtimes.swiftshader import VulkanUnavailable, find_vulkan
from depthport.scratch import process_folder

REJECTED_HEADER = "Following operations are not supported by GPU delegate:"
REJECTED_LINE = re.compile(r"^([A-Z][A-Z0-9_]*): (.+)$")
ADAPTER = re.compile(r"Selected adapter: ([^,\n]+)")
NO_ADAPTER = "No adapters found"
PARTITION = re.compile(r"^(\d+ operations will run on the GPU.*|No operations will run on the GPU.*)$", re.M)
SHAPE_MISMATCH = re.compile(r"Shape mismatch in GpuModelBuilder[^\n]*")
RUNTIME_ERROR_LINE = re.compile(r"└ (.+)")

FP32_REL_L2_TOL = 1e-4
FP16_REL_L2_TOL = 1e-2


def empty_runtime(note: str) -> GpuRuntime:
    """The runtime section when no runtime result exists (not run, or no device)."""
    return GpuRuntime(note=note)


def run_gpu_check(path: str | Path, numeric_file: str | Path | None = None, compare: bool = True,
                  enforce_f32: bool = True, timeout: float = 300.0, seed: int = 0,
                  rel_l2_tol: float | None = None) -> GpuRuntime:
    """Compile `path` GPU-only; optionally run `numeric_file` (default: `path`) on GPU and CPU and compare.

    Returns the "runtime" section (``GpuRuntime``): fully_delegated (None when no verdict was possible), the
    rejected ops, the numeric run against the CPU (shape: input shape of the numeric run), and the run's setting.
    The worker's result file is the child's own JSON, read here only.
    """
    try:
        vulkan = find_vulkan()
    except VulkanUnavailable as exc:
        return empty_runtime(f"no Vulkan device available: {exc}")
    tol = rel_l2_tol if rel_l2_tol is not None else (FP32_REL_L2_TOL if enforce_f32 else FP16_REL_L2_TOL)
    with tempfile.TemporaryDirectory(prefix="gpu-", dir=process_folder()) as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "depthport.check.gpu_worker", "--model", str(path), "--out", str(out),
               "--seed", str(seed)]
        cmd += ["--compare"] if compare else []
        cmd += ["--numeric-file", str(numeric_file)] if numeric_file else []
        cmd += [] if enforce_f32 else ["--allow-fp16"]
        log, returncode, elapsed = _run_child(cmd, _child_env(vulkan.env()), timeout)
        worker = json.loads(out.read_text()) if out.exists() else {}
    result = replace(_interpret(worker, log, returncode, timeout), precision="fp32" if enforce_f32 else "fp16-allowed",
                     tolerance=tol, vulkan=vulkan.describe(), wall_s=round(elapsed, 2))
    numeric = worker.get("numeric")
    if numeric and result.fully_delegated:
        return _with_numeric(result, numeric, tol)
    if compare and result.fully_delegated and returncode is None:
        return replace(result, note=result.note + f"; numerical run timed out after {timeout:g} s")
    return result


def _child_env(env: dict[str, str]) -> dict[str, str]:
    """Make sure the child imports this depthport (src layout) even when not installed."""
    src = str(Path(depthport.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def _run_child(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[str, int | None, float]:
    """Run the worker; returns (combined log, return code or None on timeout, seconds)."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace", timeout=timeout)
        return proc.stdout + proc.stderr, proc.returncode, time.perf_counter() - start
    except subprocess.TimeoutExpired as exc:
        log = "".join(_text(s) for s in (exc.stdout, exc.stderr))
        return log, None, time.perf_counter() - start


def _text(stream: bytes | str | None) -> str:
    if isinstance(stream, bytes):
        return stream.decode("utf-8", "replace")
    return stream or ""


def parse_rejected_ops(log: str) -> list[RejectedOp]:
    """The accelerator's "not supported by GPU delegate" list."""
    rejected = []
    lines = iter(log.splitlines())
    for line in lines:
        if REJECTED_HEADER not in line:
            continue
        for entry in lines:
            match = REJECTED_LINE.match(entry.strip())
            if not match:
                break
            rejected.append(RejectedOp(match.group(1), match.group(2).strip()))
    return rejected


def _interpret(worker: dict[str, Any], log: str, returncode: int | None, timeout: float) -> GpuRuntime:
    """Turn the worker result and log into the runtime section (without numerics)."""
    adapter = ADAPTER.search(log)
    if NO_ADAPTER in log and not adapter:
        return empty_runtime("no Vulkan adapter: the WebGPU accelerator found no usable device (No adapters found)")
    result = GpuRuntime(rejected_ops=tuple(parse_rejected_ops(log)), compile_s=worker.get("compile_s"),
                        adapter=adapter.group(1).strip() if adapter else None)
    if "compiled" not in worker:
        if returncode is None:
            return replace(result, note=f"GPU compile gave no verdict: timed out after {timeout:g} s")
        return replace(result, note=f"GPU compile gave no verdict: worker exited with status {returncode}: "
                                    f"{_last_line(log)}")
    partition = PARTITION.search(log)
    notes = [partition.group(1)] if partition else []
    notes += SHAPE_MISMATCH.findall(log)[:1]
    if worker["compiled"]:
        delegated = bool(worker.get("fully_accelerated"))
        notes.insert(0, "all ops delegated to the GPU" if delegated else "not fully delegated")
    else:
        delegated = False
        notes.insert(0, "GPU-only compile failed: " + _error_summary(worker.get("error", "")))
    return replace(result, fully_delegated=delegated, note="; ".join(notes))


def _with_numeric(result: GpuRuntime, numeric: dict[str, Any], tol: float) -> GpuRuntime:
    """``result`` with the worker's numeric run (its own JSON: file, input_shapes, rel_l2, pearson or error)."""
    shapes = list(numeric.get("input_shapes", {}).values())
    result = replace(result, numeric_file=numeric.get("file"), shape=tuple(shapes[0]) if shapes else None)
    if "error" in numeric:
        return replace(result, numeric_ok=False,
                       note=result.note + "; numerical run failed: " + _error_summary(numeric["error"]))
    ok = numeric["rel_l2"] <= tol
    return replace(result, rel_l2_vs_cpu=numeric["rel_l2"], pearson_vs_cpu=numeric["pearson"], numeric_ok=ok,
                   note=result.note + f"; rel L2 vs CPU {numeric['rel_l2']:.2e} {'within' if ok else 'above'} "
                                      f"tolerance {tol:g}")


def _error_summary(error: str) -> str:
    match = RUNTIME_ERROR_LINE.findall(error)
    return (match[-1] if match else error.strip().splitlines()[-1] if error.strip() else "unknown error").strip()


def _last_line(log: str) -> str:
    lines = [line for line in log.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"
