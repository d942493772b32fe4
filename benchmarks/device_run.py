"""The GPU-machine run (started by benchmarks/device_run.sh) on what benchmarks/device_prepare.py made: LiteRT's GPU
accelerator on a real GPU at FP16 compute, against the FP16-compute predictions, and the CPU across thread counts.

Needs numpy, ai_edge_litert and depthport's ``runtimes`` and ``core`` (no torch, no converter). For every set
folder in ``--in`` (plain, FP16-safe, stress weights, both):
1. the carried files are checked against their SHA-256, then run on this CPU (LiteRT, FP32 compute) and compared
   with the outputs made where they were prepared, and run once more with XNNPACK's FP16 inference forced: FP16
   arithmetic where this CPU has it (avx512_fp16, as phones' ARMv8.2 CPUs), beside the prediction of XNNPACK's
   f16 kernels (the set's ``xnnpack-fp16`` export, when prepared); elsewhere FP16 storage only, labelled so;
2. each file runs fully on the GPU accelerator, one child process per file and precision (FP16 compute for every
   set, FP32 compute for the plain one): load time, median latency, and the output on scikit-image's chelsea (the
   prediction's input) against the FP32 file's output (what the prediction's rel. L2 is measured against) and the
   same file on the CPU, whether it stayed finite, and the measured rel. L2 over the predicted one;
3. the plain set's file on the CPU at each of ``--threads``, interleaved rounds, medians.

``--swiftshader``: the GPU runs on SwiftShader (to test this script on a machine without a GPU; SwiftShader has no
FP16 shaders, so it says nothing about FP16 compute). ``--out`` receives summary.json and summary.md; the files
and the GPU outputs stay in a temporary folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from depthport.core import metrics
from depthport.core.machine import fp16_arithmetic, machine_info
from depthport.core.report_model import Fp16Arithmetic, Fp16Prediction, Machine, load


def sh(cmd: list[str], timeout: float = 30) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (proc.stdout + proc.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"


def environment() -> dict:
    import ai_edge_litert

    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]) \
        if shutil.which("nvidia-smi") else ""
    litert = Path(ai_edge_litert.__file__).parent
    dist = sorted(litert.parent.glob("ai_edge_litert-*.dist-info"))
    return {"machine": machine_info(), "nvidia_smi": gpu or None, "python": sys.version.split()[0],
            "ai_edge_litert": dist[0].name.split("-")[1] if dist else str(litert),
            **{k: os.environ.get(k) for k in ("VK_ICD_FILENAMES", "VK_DRIVER_FILES")}}


def sets(folder: Path) -> list[dict]:
    found = []
    for path in sorted(folder.glob("*/set.json")):
        entry = json.loads(path.read_text())
        entry["dir"] = path.parent
        found.append(entry)
    return found


def compare(out: np.ndarray, ref: np.ndarray) -> dict:
    return {"rel_l2": metrics.rel_l2(out, ref), "pearson": metrics.pearson(out, ref),
            "delta125": metrics.delta125(out, ref), "max_abs": metrics.max_abs(out, ref)}


def gpu_child(path: str, precision: str, x_path: str, out_npy: str, runs: int, swiftshader: bool) -> None:
    """One file at one GPU precision, fully on the GPU accelerator or an error; prints one JSON line."""
    from depthport.runtimes import load_runner
    from depthport.runtimes.litert_gpu import use_swiftshader

    if swiftshader:
        use_swiftshader()
    t = time.perf_counter()
    try:
        runner = load_runner(path, accelerator="gpu", gpu_precision=precision, threads=2)
        x = np.load(x_path)
        depth = np.asarray(runner.run(x), dtype=np.float32)
        first_s = time.perf_counter() - t
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            runner.run(x)
            times.append((time.perf_counter() - t0) * 1e3)
        np.save(out_npy, depth)
        result = {"ok": True, "runtime": runner.runtime, "median_ms": float(np.median(times)),
                  "min_ms": float(np.min(times)), "runs": runs, "load_and_first_run_s": first_s}
    except Exception as exc:  # the accelerator's own message is the finding
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print("RESULT " + json.dumps(result), flush=True)


def run_gpu(path: Path, precision: str, x_path: Path, out_npy: Path, runs: int, swiftshader: bool,
            timeout: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--gpu-child", str(path), "--precision", precision,
           "--x", str(x_path), "--out-npy", str(out_npy), "--runs", str(runs), *(["--swiftshader"] * swiftshader)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        tail = " | ".join((proc.stderr.strip().splitlines() or ["(no output)"])[-3:])
        return {"ok": False, "error": f"child exited {proc.returncode}: {tail}"}
    return json.loads(lines[-1][len("RESULT "):])


def unpack(entry: dict, kind: str, scratch: Path) -> Path:
    """The carried file (``.xz`` or plain) as a .tflite in ``scratch``, checked against its SHA-256."""
    import lzma

    f = entry["files"][kind]
    stored = entry["dir"] / f["stored"]
    data = lzma.decompress(stored.read_bytes()) if stored.suffix == ".xz" else stored.read_bytes()
    if hashlib.sha256(data).hexdigest() != f["sha256"]:
        raise RuntimeError(f"{stored}: SHA-256 differs from the prepared file")
    path = scratch / f["file"]
    path.write_bytes(data)
    return path


XNNPACK_FORCE_FP16 = 4  # TFLITE_XNNPACK_DELEGATE_FLAG_FORCE_FP16: FP16 inference of FP32 operators


def cpu_force_fp16(path: Path, x: np.ndarray, threads: int, size: int) -> np.ndarray:
    """The file on LiteRT's CPU (XNNPACK) with FP16 inference forced: FP16 arithmetic where the CPU has it
    (avx512_fp16, ARMv8.2 fp16), else FP16 activations between FP32-computed ops (F16C)."""
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.cpu_options import CpuOptions
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import Options

    from depthport.quiet import native_stderr_muted

    options = Options(HardwareAccelerator.CPU,
                      cpu_options=CpuOptions(num_threads=threads, xnnpack_flags=XNNPACK_FORCE_FP16))
    with native_stderr_muted():
        model = CompiledModel.from_file(str(path), options=options)
        inputs, outputs = model.create_input_buffers(0), model.create_output_buffers(0)
        inputs[0].write(np.ascontiguousarray(x, dtype=np.float32))
        model.run_by_index(0, inputs, outputs)
    return outputs[0].read(size, np.float32)


def study(entry: dict, scratch: Path, runs: int, swiftshader: bool, deadline: float) -> list[dict]:
    """Every carried file of one set: checksum (all of the set's files before any runs, so that an altered file costs
    no device time), CPU here, GPU at FP16 (and FP32 for the plain set)."""
    from depthport.quiet import native_stderr_muted
    from depthport.runtimes import load_runner

    folder, rows = entry["dir"], []
    ref_fp32 = np.load(folder / entry["cpu_outputs"]["fp32_file"])
    pred = load(Fp16Prediction, entry.get("prediction")) or Fp16Prediction()
    pred_xnnpack = load(Fp16Prediction, entry.get("prediction_xnnpack"))
    x_path = scratch / f"x_{entry['set']}.npy"
    np.save(x_path, np.load(folder / entry["input"])["x"])
    x = np.load(x_path)
    paths = {kind: unpack(entry, kind, scratch) for kind in entry["files"]}
    entry["paths"] = paths
    for kind, f in entry["files"].items():
        row = {"set": entry["set"], "file": f["file"], "storage": kind}
        path = paths[kind]
        with native_stderr_muted():
            cpu = np.asarray(load_runner(path, threads=os.cpu_count() or 2).run(x), dtype=np.float32)
        carried_cpu = np.load(folder / entry["cpu_outputs"][f"{kind}_file"])
        row["cpu_here_vs_prepared_rel_l2"] = metrics.rel_l2(cpu, carried_cpu)
        arithmetic = load(Fp16Arithmetic, fp16_arithmetic())
        try:
            forced = cpu_force_fp16(path, x, os.cpu_count() or 2, ref_fp32.size).reshape(ref_fp32.shape)
            fp16_cpu = {"finite": bool(np.isfinite(forced).all()), "mode": arithmetic.mode,
                        "predicted_xnnpack_rel_l2": pred_xnnpack.rel_l2 if pred_xnnpack else None}
            fp16_cpu |= {"vs_fp32_file_cpu": compare(forced, ref_fp32)} if fp16_cpu["finite"] else {}
        except Exception as exc:  # a runtime without the flag, or a file XNNPACK refuses in FP16
            fp16_cpu = {"error": f"{type(exc).__name__}: {exc}"}
        row["cpu_xnnpack_force_fp16"] = fp16_cpu
        for precision in ("fp16", "fp32") if entry["set"] == "plain" else ("fp16",):
            left = deadline - time.monotonic()
            if left < 20:
                rows.append(row | {"gpu_precision": precision, "ok": False, "error": f"skipped: {left:.0f} s left"})
                continue
            npy = scratch / f"gpu_{entry['set']}_{kind}_{precision}.npy"
            g = run_gpu(path, precision, x_path, npy, runs, swiftshader, timeout=min(240.0, left))
            r = row | {"gpu_precision": precision} | g
            if g.get("ok"):
                depth = np.load(npy)
                finite = bool(np.isfinite(depth).all())
                vs_fp32 = compare(depth, ref_fp32) if finite else None
                r |= {"finite": finite, "max_abs_output": float(np.nanmax(np.abs(depth))) if finite else None,
                      "vs_fp32_file_cpu": vs_fp32, "vs_same_file_cpu": compare(depth, cpu) if finite else None}
                if precision == "fp16":
                    got = vs_fp32["rel_l2"] if vs_fp32 else None
                    r["predicted_rel_l2"] = pred.rel_l2
                    r["predicted_overflow"] = [o.op for o in pred.overflow_ops][:3]
                    r["measured_over_predicted"] = got / pred.rel_l2 if got and pred.rel_l2 else None
            rows.append(r)
    return rows


def cpu_threads(path: Path, x_path: Path, threads: list[int], rounds: int) -> list[dict]:
    """One runner per thread count, timed round-robin (one run each per round), medians over rounds."""
    from depthport.quiet import native_stderr_muted
    from depthport.runtimes import load_runner

    x = np.load(x_path)
    with native_stderr_muted():
        runners = {t: load_runner(path, threads=t) for t in threads}
        for r in runners.values():
            r.run(x)
        times: dict[int, list[float]] = {t: [] for t in threads}
        for _ in range(rounds):
            for t, r in runners.items():
                t0 = time.perf_counter()
                r.run(x)
                times[t].append((time.perf_counter() - t0) * 1e3)
    return [{"threads": t, "median_ms": float(np.median(v)), "min_ms": float(np.min(v)), "rounds": rounds}
            for t, v in times.items()]


def _f(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _forced(f: dict | None) -> str:
    if not f:
        return "-"
    if "error" in f or not f.get("finite"):
        return f.get("error") or "NOT FINITE"
    v = f["vs_fp32_file_cpu"]
    return f"{v['rel_l2']:.3e}, {v['delta125']:.5f}, {_f(f.get('predicted_xnnpack_rel_l2'), '.3e')} ({f['mode']})"


def markdown(summary: dict) -> str:
    env = summary.get("environment") or {}
    m = load(Machine, env.get("machine")) or Machine()
    isa = " ".join(k for k, v in m.isa.items() if v) if m.isa else ""
    lines = [f"# depthport device run: {summary.get('model')} {summary.get('size')}", "",
             f"CPU: {m.cpu}, {m.cores} cores, ISA: {isa}",
             f"GPU: {env.get('nvidia_smi') or 'none found'}; ai_edge_litert {env.get('ai_edge_litert')}, "
             f"Python {env.get('python')}; prepared on: {summary.get('prepared_on')}", "",
             "| set | file | GPU compute | ok | median ms | load+first s | finite | rel L2 vs FP32 file (CPU) | "
             "predicted | measured/predicted | δ<1.25 | vs same file (CPU) | CPU here vs prepared | "
             "CPU XNNPACK forced FP16: rel L2 vs FP32 file, δ<1.25, predicted for XNNPACK (mode) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary.get("gpu") or []:
        ref = r.get("vs_fp32_file_cpu") or {}
        cells = [r["set"], r["file"], r.get("gpu_precision", "-"), "yes" if r.get("ok") else f"NO: {r.get('error')}",
                 _f(r.get("median_ms"), ".2f"), _f(r.get("load_and_first_run_s"), ".1f"),
                 {True: "yes", False: "NO"}.get(r.get("finite"), "-"), _f(ref.get("rel_l2"), ".3e"),
                 _f(r.get("predicted_rel_l2"), ".3e"), _f(r.get("measured_over_predicted"), ".2f"),
                 _f(ref.get("delta125"), ".5f"), _f((r.get("vs_same_file_cpu") or {}).get("rel_l2"), ".3e"),
                 _f(r.get("cpu_here_vs_prepared_rel_l2"), ".2e"), _forced(r.get("cpu_xnnpack_force_fp16"))]
        lines.append("| " + " | ".join(cells) + " |")
    if summary.get("cpu"):
        lines += ["", "| CPU threads | median ms | min ms |", "|---|---|---|"]
        lines += [f"| {c['threads']} | {c['median_ms']:.1f} | {c['min_ms']:.1f} |" for c in summary["cpu"]]
    lines += ["", "| step | status | s |", "|---|---|---|"]
    lines += [f"| {k} | {v['status']} | {v.get('seconds', '-')} |" for k, v in summary["steps"].items()]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--in", dest="inp", default=".device-in")
    p.add_argument("--out", default=os.environ.get("OUT") or "device-out")
    p.add_argument("--runs", type=int, default=10, help="timed GPU runs per file and precision")
    p.add_argument("--threads", default="1,2,4,8,16", help="CPU thread counts (the plain set's file)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--budget-s", type=float, default=400)
    p.add_argument("--swiftshader", action="store_true", help="GPU on SwiftShader (a test without a GPU)")
    p.add_argument("--gpu-child", help=argparse.SUPPRESS)
    p.add_argument("--precision", help=argparse.SUPPRESS)
    p.add_argument("--x", help=argparse.SUPPRESS)
    p.add_argument("--out-npy", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.gpu_child:
        gpu_child(args.gpu_child, args.precision, args.x, args.out_npy, args.runs, args.swiftshader)
        return 0
    inp, out = Path(args.inp), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    prepared = json.loads((inp / "common" / "machine.json").read_text())
    prepared_on = load(Machine, prepared.get("machine")) or Machine()
    summary: dict = {"model": prepared.get("model"), "size": prepared.get("size"), "steps": {},
                     "prepared_on": prepared_on.cpu,
                     "prepared_versions": prepared.get("versions")}

    def step(name, fn, *a):
        t = time.monotonic()
        try:
            value, status = fn(*a), "ok"
        except Exception as exc:  # record and go on: one failed step must not lose the others' figures
            value, status = None, f"failed: {type(exc).__name__}: {exc}"
        summary["steps"][name] = {"status": status, "seconds": round(time.monotonic() - t, 1)}
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        return value

    summary["environment"] = step("environment", environment)
    found = sets(inp)
    summary["sets"] = [e["set"] for e in found]
    summary["gpu"] = []
    with tempfile.TemporaryDirectory(prefix="depthport-device-") as tmp:  # the unpacked files and inputs
        scratch = Path(tmp)
        for entry in found:
            summary["gpu"] += step(f"set {entry['set']}", study, entry, scratch, args.runs, args.swiftshader,
                                   deadline) or []
        plain = next((e for e in found if e["set"] == "plain" and e.get("paths")), None)
        if plain is not None and deadline - time.monotonic() > 30:
            path = plain["paths"].get("fp32") or plain["paths"]["fp16"]
            threads = [int(t) for t in args.threads.split(",")]
            summary["cpu"] = step("cpu threads", cpu_threads, path, scratch / "x_plain.npy", threads, args.rounds)
    text = markdown(summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out / "summary.md").write_text(text)
    print(text)
    bad = [r for r in summary["gpu"] if not r.get("ok")]
    return 1 if bad or any(not s["status"].startswith("ok") for s in summary["steps"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
