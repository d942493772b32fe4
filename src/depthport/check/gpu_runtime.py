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
from pathlib import Path
from typing import Any

import depthport
from depthport.runtimes.swiftshader import VulkanUnavailable, find_vulkan

REJECTED_HEADER = "Following operations are not supported by GPU delegate:"
REJECTED_LINE = re.compile(r"^([A-Z][A-Z0-9_]*): (.+)$")
ADAPTER = re.compile(r"Selected adapter: ([^,\n]+)")
NO_ADAPTER = "No adapters found"
PARTITION = re.compile(r"^(\d+ operations will run on the GPU.*|No operations will run on the GPU.*)$", re.M)
SHAPE_MISMATCH = re.compile(r"Shape mismatch in GpuModelBuilder[^\n]*")
RUNTIME_ERROR_LINE = re.compile(r"└ (.+)")

FP32_REL_L2_TOL = 1e-4
FP16_REL_L2_TOL = 1e-2


def empty_runtime(note: str) -> dict[str, Any]:
    """The runtime section when no runtime result exists (not run, or no device)."""
    return {"fully_delegated": None, "rejected_ops": [], "rel_l2_vs_cpu": None, "pearson_vs_cpu": None,
            "shape": None, "numeric_file": None, "numeric_ok": None, "note": note}


def run_gpu_check(path: str | Path, numeric_file: str | Path | None = None, compare: bool = True,
                  enforce_f32: bool = True, timeout: float = 300.0, seed: int = 0,
                  rel_l2_tol: float | None = None) -> dict[str, Any]:
    """Compile `path` GPU-only; optionally run `numeric_file` (default: `path`) on GPU and CPU and compare.

    Returns the "runtime" section: fully_delegated (bool, or None when no verdict was possible),
    rejected_ops [{"op", "reason"}], rel_l2_vs_cpu, pearson_vs_cpu, shape (input shape of the numeric
    run), numeric_file, numeric_ok, precision, tolerance, adapter, vulkan, compile_s, note.
    """
    try:
        vulkan = find_vulkan()
    except VulkanUnavailable as exc:
        return empty_runtime(f"no Vulkan device available: {exc}")
    tol = rel_l2_tol if rel_l2_tol is not None else (FP32_REL_L2_TOL if enforce_f32 else FP16_REL_L2_TOL)
    with tempfile.TemporaryDirectory(prefix="depthport-gpu-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "depthport.check.gpu_worker", "--model", str(path), "--out", str(out),
               "--seed", str(seed)]
        cmd += ["--compare"] if compare else []
        cmd += ["--numeric-file", str(numeric_file)] if numeric_file else []
        cmd += [] if enforce_f32 else ["--allow-fp16"]
        log, returncode, elapsed = _run_child(cmd, _child_env(vulkan.env()), timeout)
        worker = json.loads(out.read_text()) if out.exists() else {}
    result = _interpret(worker, log, returncode, timeout)
    result.update(precision="fp32" if enforce_f32 else "fp16-allowed", tolerance=tol,
                  vulkan=vulkan.describe(), wall_s=round(elapsed, 2))
    numeric = worker.get("numeric")
    if numeric and result["fully_delegated"]:
        _add_numeric(result, numeric, tol)
    elif compare and result["fully_delegated"] and returncode is None:
        result["note"] += f"; numerical run timed out after {timeout:g} s"
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


def parse_rejected_ops(log: str) -> list[dict[str, str]]:
    """The accelerator's "not supported by GPU delegate" list as [{"op", "reason"}]."""
    rejected = []
    lines = iter(log.splitlines())
    for line in lines:
        if REJECTED_HEADER not in line:
            continue
        for entry in lines:
            match = REJECTED_LINE.match(entry.strip())
            if not match:
                break
            rejected.append({"op": match.group(1), "reason": match.group(2).strip()})
    return rejected


def _interpret(worker: dict[str, Any], log: str, returncode: int | None, timeout: float) -> dict[str, Any]:
    """Turn the worker result and log into the runtime section (without numerics)."""
    adapter = ADAPTER.search(log)
    if NO_ADAPTER in log and not adapter:
        return empty_runtime("no Vulkan adapter: the WebGPU accelerator found no usable device (No adapters found)")
    result = empty_runtime("")
    result["adapter"] = adapter.group(1).strip() if adapter else None
    result["rejected_ops"] = parse_rejected_ops(log)
    result["compile_s"] = worker.get("compile_s")
    if "compiled" not in worker:
        if returncode is None:
            result["note"] = f"GPU compile gave no verdict: timed out after {timeout:g} s"
        else:
            result["note"] = f"GPU compile gave no verdict: worker exited with status {returncode}: {_last_line(log)}"
        return result
    partition = PARTITION.search(log)
    notes = [partition.group(1)] if partition else []
    notes += SHAPE_MISMATCH.findall(log)[:1]
    if worker["compiled"]:
        result["fully_delegated"] = bool(worker.get("fully_accelerated"))
        notes.insert(0, "all ops delegated to the GPU" if result["fully_delegated"] else "not fully delegated")
    else:
        result["fully_delegated"] = False
        notes.insert(0, "GPU-only compile failed: " + _error_summary(worker.get("error", "")))
    result["note"] = "; ".join(notes)
    return result


def _add_numeric(result: dict[str, Any], numeric: dict[str, Any], tol: float) -> None:
    result["numeric_file"] = numeric.get("file")
    shapes = list(numeric.get("input_shapes", {}).values())
    result["shape"] = shapes[0] if shapes else None
    if "error" in numeric:
        result["numeric_ok"] = False
        result["note"] += "; numerical run failed: " + _error_summary(numeric["error"])
        return
    result["rel_l2_vs_cpu"] = numeric["rel_l2"]
    result["pearson_vs_cpu"] = numeric["pearson"]
    result["numeric_ok"] = numeric["rel_l2"] <= tol
    verdict = "within" if result["numeric_ok"] else "above"
    result["note"] += f"; rel L2 vs CPU {numeric['rel_l2']:.2e} {verdict} tolerance {tol:g}"


def _error_summary(error: str) -> str:
    match = RUNTIME_ERROR_LINE.findall(error)
    return (match[-1] if match else error.strip().splitlines()[-1] if error.strip() else "unknown error").strip()


def _last_line(log: str) -> str:
    lines = [line for line in log.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"
