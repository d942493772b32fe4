"""The GPU-machine run (started by benchmarks/device_run.sh): LiteRT's GPU accelerator on a real GPU, and the CPU
benchmark across thread counts, everything written under --out.

1. Files: depthport's DA-V2-Small (518x686, random weights) exported to litert-fp32, litert-fp16 and litert-int8
   (``depthport export``, whose report.json holds the FP16-compute prediction ``fp16_compute``), and the plain
   litert-torch conversion of transformers' model (as benchmarks/bench_litert_da2.py makes it), in parallel.
2. GPU (when ``nvidia-smi`` finds one): the FP32 and FP16 files, each at FP32 and FP16 compute precision, fully on
   the LiteRT GPU accelerator, one child process each: median latency, and the output on scikit-image's chelsea
   (the prediction's input) against the CPU run of the same file and of the FP32 file, beside the predicted
   rel. L2 of FP16 compute. Then the FP16 study: the FP16-safe file (``--fp16-safe``), the stress-weights file
   (planted trained-weight outliers) and the stress-weights FP16-safe file, each at FP16 precision on the GPU
   against its CPU run, beside its own prediction (and whether the GPU output stayed finite).
3. CPU at 1/2/4/8/16 threads: plain vs FP32 vs INT8 interleaved with the GEMM probe (FP32, dynamic and static
   INT8 chains): latency, GMAC, GMAC/s, % of peak, INT8's possible gain.

``--small``: the tiny config (da2-tiny, 56x70), threads 1/2, a small probe; the GPU part only where there is a
GPU. A deadline (``--budget-s``) skips what would not finish; every step records its status in summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CONFIGS = {
    "full": {"model": "da2-small", "size": "518x686", "threads": (1, 2, 4, 8, 16), "rounds": 3, "iters": 1,
             "warmup": 1, "probe": "full", "gpu_runs": 10},
    "small": {"model": "da2-tiny", "size": "56x70", "threads": (1, 2), "rounds": 2, "iters": 1, "warmup": 1,
              "probe": "tiny", "gpu_runs": 3},
}
TARGETS = ("litert-fp32", "litert-fp16", "litert-int8")
# The FP16 study (GPU at FP16 precision vs the predictions): FP32 files of the same model, FP16-safe
# (--fp16-safe), with stress weights (planted trained-weight outliers), and both.
FP16_STUDY = {"safe": ("random", True), "stress": ("stress", False), "stress_safe": ("stress", True)}


class Run:
    """The output folder, the deadline and the summary, rewritten after every step."""

    def __init__(self, out: Path, budget_s: float, mode: str):
        self.out, self.deadline, self.t0 = out, time.monotonic() + budget_s, time.monotonic()
        self.summary = {"mode": mode, "config": {k: list(v) if isinstance(v, tuple) else v
                                                 for k, v in CONFIGS[mode].items()}, "steps": {}}
        out.mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def step(self, name: str, fn, *args, need_s: float = 0):
        if self.left() < need_s:
            self.summary["steps"][name] = {"status": f"skipped: {self.left():.0f} s left, needs ~{need_s:.0f} s"}
            self.save()
            return None
        t = time.monotonic()
        try:
            value = fn(*args)
            self.summary["steps"][name] = {"status": "ok", "seconds": round(time.monotonic() - t, 1)}
        except Exception as exc:  # record and go on: a failed step must not lose the others' figures
            value = None
            self.summary["steps"][name] = {"status": f"failed: {type(exc).__name__}: {exc}",
                                           "seconds": round(time.monotonic() - t, 1)}
        self.save()
        return value

    def save(self) -> None:
        self.summary["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        (self.out / "summary.json").write_text(json.dumps(self.summary, indent=2, default=str) + "\n")


def sh(cmd: list[str], timeout: float = 30) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (proc.stdout + proc.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"


def environment() -> dict:
    from depthport.core.machine import machine_info
    from depthport.core.provenance import versions

    icds = [str(p) for d in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d") for p in sorted(Path(d).glob("*.json"))]
    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]) \
        if shutil.which("nvidia-smi") else ""
    return {"machine": machine_info(), "versions": versions(), "nvidia_smi": gpu or None,
            "gpu_present": bool(gpu) and "failed" not in gpu.lower() and "error" not in gpu.lower(),
            "vulkan_icds": icds, "VK_ICD_FILENAMES": os.environ.get("VK_ICD_FILENAMES")}


def _python(*args: str) -> list[str]:
    return [sys.executable, *args]


def make_files(run: Run, cfg: dict, gpu: bool) -> dict:
    """Export (depthport) and the plain conversion, as two child processes side by side. Without a GPU the FP16
    file (and the FP16-compute prediction) only serve the GPU part: small mode then leaves them out."""
    export_dir, plain = run.out / "export", run.out / "plain.tflite"
    targets = TARGETS if gpu or run.summary["mode"] == "full" else ("litert-fp32", "litert-int8")
    export = subprocess.Popen(_python("-m", "depthport.cli", "export", cfg["model"], "--size", cfg["size"],
                                      "--targets", ",".join(targets), "--out", str(export_dir),
                                      "--skip", "ledger,verify,bench,report,card"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    conv = subprocess.Popen(_python(str(Path(__file__).resolve()), "--plain-child", str(plain), "--model", cfg["model"],
                                    "--size", cfg["size"]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logs = {}
    for name, proc in (("export", export), ("plain", conv)):
        try:
            logs[name] = proc.communicate(timeout=max(60.0, run.left()))[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            logs[name] = proc.communicate()[0] + "\n[killed: out of time]"
    (run.out / "export.log").write_text(logs["export"])
    (run.out / "plain.log").write_text(logs["plain"])
    report = json.loads((export_dir / "report.json").read_text()) if (export_dir / "report.json").exists() else {}
    files = {"plain": plain if plain.exists() else None}
    stem = cfg["model"].replace("-", "_")
    for target, suffix in zip(TARGETS, ("fp32", "fp16", "int8")):
        found = sorted(export_dir.rglob(f"{stem}_{suffix}.tflite"))  # may sit in not-shipped/ (failed a gate)
        files[suffix] = found[0] if found else None
    run.summary["files"] = {k: str(v) if v else None for k, v in files.items()}
    run.summary["exit_codes"] = {"export": export.returncode, "plain": conv.returncode}
    run.summary["fp16_compute"] = next((a.get("fp16_compute") for a in report.get("artifacts", [])
                                        if a.get("fp16_compute")), None)
    return files


def fp16_study_files(run: Run, cfg: dict) -> dict:
    """The FP16-study files, one export each (litert-fp32, check stage on chelsea: its FP16-compute prediction in
    GPU mode and, when that fails, with FP32 accumulation); their predictions go into summary["predictions"]."""
    from PIL import Image
    import skimage.data

    images = run.out / "fp16-images"
    images.mkdir(exist_ok=True)
    Image.fromarray(skimage.data.chelsea()).save(images / "chelsea.png")
    files, predictions = {}, {}
    stem = cfg["model"].replace("-", "_")
    for name, (weights, safe) in FP16_STUDY.items():
        out = run.out / f"export-{name}"
        cmd = _python("-m", "depthport.cli", "export", cfg["model"], "--size", cfg["size"], "--weights", weights,
                      "--targets", "litert-fp32", "--images", str(images), "--out", str(out),
                      "--skip", "ledger,verify,bench,report,card", *(["--fp16-safe"] if safe else []))
        log = subprocess.run(cmd, capture_output=True, text=True, timeout=max(60.0, run.left()))
        (run.out / f"export-{name}.log").write_text(log.stdout + log.stderr)
        found = sorted(out.rglob(f"{stem}_fp32.tflite"))
        files[name] = found[0] if found else None
        report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
        pred = next((a.get("fp16_compute") for a in report.get("artifacts", []) if a.get("fp16_compute")), {}) or {}
        predictions[name] = {"rel_l2": pred.get("rel_l2"), "overflow_ops": pred.get("overflow_ops", [])[:3],
                             "fp16_with_fp32_accum": (pred.get("fp16_with_fp32_accum") or {}).get("rel_l2")}
    run.summary["predictions"] = predictions
    run.summary["files"].update({k: str(v) if v else None for k, v in files.items()})
    return files


def plain_child(path: str, model: str, size: str) -> None:
    import torch

    sys.path.insert(0, str(HERE))
    from bench_litert_da2 import convert_to

    from depthport.build import resolve_weights
    from depthport.preprocess import parse_size
    from depthport.quiet import native_stderr_muted
    from depthport.reference import reference_model
    from depthport.registry import get_spec

    spec = get_spec(model)
    hw = parse_size(size)
    with native_stderr_muted():
        convert_to(reference_model(spec, resolve_weights(spec, "random")), torch.zeros(1, 3, *hw), Path(path))


def chelsea(hw) -> np.ndarray:
    import skimage.data
    from PIL import Image

    from depthport.preprocess import to_tensor

    return to_tensor(Image.fromarray(skimage.data.chelsea()), tuple(hw), normalize=True)


def gpu_child(path: str, precision: str, out_json: str, runs: int) -> None:
    """One file at one GPU precision: fully on the GPU accelerator or an error; output saved beside the JSON."""
    from depthport.runtimes import load_runner

    t = time.perf_counter()
    try:
        runner = load_runner(path, accelerator="gpu", gpu_precision=precision, threads=2)
        x = chelsea(runner.input_shape[-2:])
        depth = np.asarray(runner.run(x))
        compile_s = time.perf_counter() - t
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            runner.run(x)
            times.append((time.perf_counter() - t0) * 1e3)
        np.save(out_json.replace(".json", ".npy"), depth)
        result = {"ok": True, "runtime": runner.runtime, "median_ms": float(np.median(times)),
                  "min_ms": float(np.min(times)), "runs": runs, "load_and_first_run_s": compile_s}
    except Exception as exc:  # the accelerator's own message is the finding
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    Path(out_json).write_text(json.dumps(result))


def gpu_runs(run: Run, files: dict, cfg: dict) -> list[dict]:
    from depthport.core.metrics import rel_l2
    from depthport.quiet import native_stderr_muted
    from depthport.runtimes import load_runner

    names = [n for n in ("fp32", "fp16", *FP16_STUDY) if files.get(n)]
    with native_stderr_muted():
        cpu = {n: np.asarray(r.run(chelsea(r.input_shape[-2:])))
               for n, r in ((n, load_runner(files[n], threads=2)) for n in names)}
    predictions = run.summary.get("predictions") or {}
    rows = []
    for name in names:
        predicted = (predictions.get(name) or run.summary.get("fp16_compute") or {}).get("rel_l2")
        for precision in ("fp16",) if name in FP16_STUDY else ("fp32", "fp16"):
            out_json = run.out / f"gpu_{name}_file_{precision}_compute.json"
            try:
                proc = subprocess.run(_python(str(Path(__file__).resolve()), "--gpu-child", str(files[name]),
                                              "--precision", precision, "--out-json", str(out_json), "--runs",
                                              str(cfg["gpu_runs"])), capture_output=True, text=True,
                                      timeout=max(30.0, min(240.0, run.left())))
                tail = (proc.stderr.strip().splitlines() or [""])[-1]
            except subprocess.TimeoutExpired:
                proc, tail = None, "timed out"
            row = json.loads(out_json.read_text()) if out_json.exists() else {
                "ok": False, "error": f"child exited {getattr(proc, 'returncode', None)}: {tail}"}
            if row.get("ok"):
                depth = np.load(str(out_json).replace(".json", ".npy"))
                row["finite"] = bool(np.isfinite(depth).all())
                row["rel_l2_vs_cpu_same_file"] = rel_l2(depth, cpu[name])
                row["rel_l2_vs_cpu_fp32_file"] = rel_l2(depth, cpu["fp32"]) if "fp32" in cpu else None
            row.update(file=name, gpu_precision=precision,
                       predicted_fp16_compute_rel_l2=predicted if precision == "fp16" else None)
            rows.append(row)
            run.summary["gpu"] = rows
            run.save()
    return rows


def cpu_threads(run: Run, files: dict, cfg: dict) -> list[dict]:
    """One interleaved run per thread count: plain, FP32, INT8 and the probe chains."""
    from depthport.bench import roofline
    from depthport.bench.probe import SPECS, ProbeSpec, probe_entries, summarize
    from depthport.bench.timing import Entry, sample_input, time_interleaved
    from depthport.quiet import native_stderr_muted
    from depthport.runtimes import load_runner

    spec = SPECS.get(cfg["probe"]) or ProbeSpec(layers=2, tokens=256, dim=96, hidden=384)
    out, labels = [], [k for k in ("plain", "fp32", "int8") if files.get(k)]
    for threads in cfg["threads"]:
        if run.left() < 20:
            out.append({"threads": threads, "skipped": f"{run.left():.0f} s left"})
            continue
        with native_stderr_muted():
            entries = [Entry(k, r, sample_input(r.input_shape))
                       for k, r in ((k, load_runner(files[k], threads=threads)) for k in labels)]
            entries += probe_entries(spec, threads)
            records = time_interleaved(entries, cfg["rounds"], cfg["warmup"], cfg["iters"])
        probe = summarize(spec, records[len(labels):], threads)
        cache: dict = {}
        rows = []
        for entry, rec in zip(entries, records[:len(labels)]):
            rec.update(roofline.figures(roofline.entry_macs(entry, cache), rec["median"], probe))
            rows.append({k: rec.get(k) for k in ("label", "median", "min", "cpu_median", "gmac", "gmac_per_s",
                                                 "pct_of_peak", "pct_of_mixed_peak", "round_medians")}
                        | {"x_plain_paired": rec["ratio"]["paired"] if labels[0] == "plain" else None})
        out.append({"threads": threads, "files": rows, "probe": probe})
        run.summary["cpu"] = out
        run.save()
    return out


def _f(value, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _gpu_lines(gpu: list[dict], cpu_best: dict) -> list[str]:
    lines = ["", "| file | GPU compute | median ms | x best CPU | rel L2 vs CPU (same file) | vs CPU FP32 file | "
             "predicted FP16-compute rel L2 | finite |", "|---|---|---|---|---|---|---|---|"]
    for g in gpu:
        if not g.get("ok"):
            lines.append(f"| {g['file']} | {g['gpu_precision']} | failed: {g.get('error')} | | | | | |")
            continue
        best = cpu_best.get(g["file"])
        x_cpu = g["median_ms"] / best if best else None
        cells = [g["file"], g["gpu_precision"], _f(g["median_ms"], ".2f"), _f(x_cpu, ".3f"),
                 _f(g["rel_l2_vs_cpu_same_file"], ".2e"), _f(g.get("rel_l2_vs_cpu_fp32_file"), ".2e"),
                 _f(g["predicted_fp16_compute_rel_l2"], ".2e"), "yes" if g.get("finite") else "NO"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _cpu_lines(cpu: list[dict]) -> list[str]:
    lines = ["", "| threads | plain ms | FP32 ms (x plain, paired) | INT8 ms (x plain, paired) | "
             "FP32 GMAC/s (% of peak) | plain % of peak | peak GMAC/s | INT8 gain dynamic / static |",
             "|---|---|---|---|---|---|---|---|"]
    for t in cpu:
        if "files" not in t:
            lines.append(f"| {t['threads']} | {t.get('skipped')} | | | | | | |")
            continue
        f = {r["label"]: r for r in t["files"]}
        gain = t["probe"].get("int8_gain", {})

        def cell(k: str) -> str:
            if k not in f:
                return "-"
            return f"{f[k]['median']:.1f}" + (f" ({f[k]['x_plain_paired']:.3f})" if f[k]["x_plain_paired"] else "")

        fp32, plain = f.get("fp32", {}), f.get("plain", {})
        cells = [str(t["threads"]), _f(plain.get("median")), cell("fp32"), cell("int8"),
                 f"{_f(fp32.get('gmac_per_s'))} ({_f(fp32.get('pct_of_peak'))} %)", f"{_f(plain.get('pct_of_peak'))} %",
                 _f(t["probe"]["peak_gmac_per_s"]),
                 " / ".join(f"{gain[k]['median']:.2f}x" for k in ("int8_dynamic", "int8_static") if k in gain)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(summary: dict) -> str:
    """summary.md: the machine, the steps, the GPU table, the CPU table."""
    env = summary.get("environment") or {}
    m = env.get("machine") or {}
    isa = " ".join(k for k, v in (m.get("isa") or {}).items() if v)
    icds = ", ".join(env.get("vulkan_icds") or []) or "none"
    lines = [f"# depthport device run ({summary['mode']})", "",
             f"CPU: {m.get('cpu')}, {m.get('cores')} cores, ISA: {isa}",
             f"GPU: {env.get('nvidia_smi') or 'none found'}; Vulkan ICDs: {icds}",
             "", "| step | status | s |", "|---|---|---|"]
    lines += [f"| {k} | {v['status']} | {v.get('seconds', '-')} |" for k, v in summary["steps"].items()]
    cpu_best: dict[str, float] = {}
    for t in summary.get("cpu") or []:
        for f in t.get("files", []):
            cpu_best[f["label"]] = min(cpu_best.get(f["label"], f["median"]), f["median"])
    if summary.get("gpu"):
        lines += _gpu_lines(summary["gpu"], cpu_best)
    if summary.get("cpu"):
        lines += _cpu_lines(summary["cpu"])
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT") or "device-out")
    p.add_argument("--small", action="store_true", help="tiny config, threads 1/2, GPU only where there is one")
    p.add_argument("--budget-s", type=float, default=420, help="stop starting steps after this many seconds")
    p.add_argument("--plain-child", help=argparse.SUPPRESS)
    p.add_argument("--gpu-child", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--size", help=argparse.SUPPRESS)
    p.add_argument("--precision", help=argparse.SUPPRESS)
    p.add_argument("--out-json", help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=10, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.plain_child:
        plain_child(args.plain_child, args.model, args.size)
        return 0
    if args.gpu_child:
        gpu_child(args.gpu_child, args.precision, args.out_json, args.runs)
        return 0
    mode = "small" if args.small else "full"
    cfg, run = CONFIGS[mode], Run(Path(args.out), args.budget_s, mode)
    run.summary["environment"] = run.step("environment", environment)
    gpu = bool((run.summary["environment"] or {}).get("gpu_present"))
    files = run.step("files", make_files, run, cfg, gpu) or {}
    if gpu:
        files.update(run.step("fp16 study files", fp16_study_files, run, cfg, need_s=90) or {})
        run.step("gpu", gpu_runs, run, files, cfg, need_s=30)
    else:
        run.summary["steps"]["gpu"] = {"status": "skipped: no GPU found (nvidia-smi)"}
    run.step("cpu", cpu_threads, run, files, cfg, need_s=20)
    run.save()
    (run.out / "summary.md").write_text(markdown(run.summary))
    print(markdown(run.summary))
    return 0 if all(s["status"] == "ok" or s["status"].startswith("skipped") for s in run.summary["steps"].values()) \
        else 1


if __name__ == "__main__":
    raise SystemExit(main())
