"""Metric depth and the rest of the family at their real configurations, random weights, default shapes.

For each model id: the LiteRT FP32 file's op count and largest tensor rank, the static GPU check (errors and
warnings), depthport's eager export-form model vs the upstream reference (transformers for the Depth Anything V2
metric ids, the `depth-anything-3` package for DA3), the LiteRT FP32 file (CPU) vs the same reference, the build
and export time and the file size. Inputs: natural images stretched to the export shape as the verify step
does (plus one N(0, 1) tensor with --noise). The reference also runs in float64 (unless --no-fp64): upstream's
own float32 error against it is the floor that any float32 implementation sits on, and the file's error against it
divided by that floor is the FP32 gate's ratio. With --small HxW it also runs a small re-export on the real LiteRT
GPU accelerator (SwiftShader where there is no GPU) and compares it with the CPU.

    flock /tmp/depthport-heavy.lock python benchmarks/metric_models.py --model da2-metric-indoor-small
    python benchmarks/metric_models.py --model da3-metric-large [--size 896x504] [--images 1] [--small 126x70]
    python benchmarks/metric_models.py --model da2-metric-tiny --work /tmp/metric   # dry run on a tiny config

Each id is one run (several ids: --model a,b): run them one at a time under the heavy-job lock.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console

from common import run_setup, timed
from depthport.build import build
from depthport.core.tflite_graph import graph_summary
from depthport.check.verdict import check_tflite
from depthport.export.litert import export_tflite
from depthport.preprocess import parse_size, to_tensor
from depthport.quiet import native_stderr_muted
from depthport.reference import reference_model
from depthport.runtimes import load_runner
from depthport.core.images import builtin_set
from depthport.core.metrics import pooled_rel_l2
from depthport.core.report_model import dump


def inputs(hw: tuple[int, int], n_images: int, noise: bool) -> list[tuple[str, np.ndarray]]:
    xs = [(name, to_tensor(img, hw)) for name, img in builtin_set()[:n_images]]
    if noise:
        xs.append(("N(0,1) noise", np.random.default_rng(0).standard_normal((1, 3, *hw)).astype(np.float32)))
    return xs


@torch.no_grad()
def outputs(model, xs, dtype: torch.dtype = torch.float32) -> list[np.ndarray]:
    model = model.to(dtype)
    return [model(torch.from_numpy(x).to(dtype)).double().numpy() for _, x in xs]


def float64_floor(spec, weights, xs, ref, eager, lite) -> dict:
    """Upstream float32, depthport's eager model and the file, each against upstream computed in float64."""
    ref64 = outputs(reference_model(spec, weights), xs, torch.float64)
    floor = pooled_rel_l2(zip(ref, ref64))
    file = pooled_rel_l2(zip(lite, ref64))
    return {"reference_fp32_vs_fp64_rel_l2": floor, "eager_vs_fp64_rel_l2": pooled_rel_l2(zip(eager, ref64)),
            "tflite_vs_fp64_rel_l2": file, "fp64_error_ratio": file / floor if floor > 0 else None}


def gpu_run(console: Console, spec, weights, small: tuple[int, int], work: Path) -> dict:
    """The real LiteRT GPU accelerator on a small re-export of the same model: delegation and rel. L2 vs CPU."""
    small_built = build(spec, small, weights)
    path = timed(console, f"small export {small[0]}x{small[1]}",
                 lambda: export_tflite(small_built.model, small, work / f"{spec.id}_{small[0]}x{small[1]}.tflite"))
    with native_stderr_muted():
        runtime = check_tflite(path, run_gpu=True, timeout=900).runtime
    return {"fully_delegated": runtime.fully_delegated, "rejected_ops": dump(runtime.rejected_ops),
            "rel_l2_vs_cpu": runtime.rel_l2_vs_cpu, "shape": dump(runtime.shape), "note": runtime.note}


def measure(console: Console, args, model_id: str) -> dict:
    setup = argparse.Namespace(model=model_id, size=args.size or "x".join(map(str, _default_hw(model_id))),
                               weights="random", work=args.work)
    hw, spec, weights, work = run_setup(setup)
    xs = inputs(hw, args.images, args.noise)
    console.print(f"\n== {spec.id} {hw[0]}x{hw[1]} ({spec.output_meaning}), weights {weights.source}, "
                  f"{len(xs)} input(s): {', '.join(n for n, _ in xs)}")
    t0 = time.perf_counter()
    built = build(spec, hw, weights)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    path = timed(console, "LiteRT FP32 export",
                 lambda: export_tflite(built.model, hw, work / f"{spec.id.replace('-', '_')}_fp32.tflite"))
    export_s = time.perf_counter() - t0
    summary, static = graph_summary(path), check_tflite(path)
    errors = [v for v in static.violations if v.severity == "error"]
    t0 = time.perf_counter()
    eager = outputs(built.model, xs)
    eager_s = (time.perf_counter() - t0) / len(xs)
    del built
    reference = reference_model(spec, weights)
    t0 = time.perf_counter()
    ref = outputs(reference, xs)
    ref_s = (time.perf_counter() - t0) / len(xs)
    del reference
    with native_stderr_muted():
        runner = load_runner(path, threads=2)
        lite = [np.asarray(runner.run(x)).reshape(r.shape) for (_, x), r in zip(xs, ref)]
    record = {
        "model": spec.id, "shape": list(hw), "output_meaning": spec.output_meaning, "inputs": [n for n, _ in xs],
        "ops": summary["op_count"], "max_rank": summary["max_tensor_rank"], "op_histogram": summary["op_histogram"],
        "gpu_static_errors": len(errors), "gpu_static_warnings": len(static.violations) - len(errors),
        "gpu_clean": static.gpu_clean, "eager_vs_reference_rel_l2": pooled_rel_l2(zip(eager, ref)),
        "tflite_vs_reference_rel_l2": pooled_rel_l2(zip(lite, ref)),
        "tflite_vs_eager_rel_l2": pooled_rel_l2(zip(lite, eager)),
        "build_s": build_s, "export_s": export_s, "file_bytes": path.stat().st_size,
        "eager_s_per_input": eager_s, "reference_s_per_input": ref_s,
        "depth_range": [float(min(r.min() for r in ref)), float(max(r.max() for r in ref))],
    }
    if not args.no_fp64:
        record.update(float64_floor(spec, weights, xs, ref, eager, lite))
    if args.small:
        record["gpu_runtime"] = gpu_run(console, spec, weights, parse_size(args.small), work)
    if not args.keep:
        path.unlink()
    return record


def _default_hw(model_id: str) -> tuple[int, int]:
    from depthport.registry import get_spec

    return get_spec(model_id).default_hw


def show(console: Console, r: dict) -> None:
    console.print(f"  ops {r['ops']} (max rank {r['max_rank']}); GPU check (static): "
                  f"{r['gpu_static_errors']} error(s), {r['gpu_static_warnings']} warning(s), "
                  f"gpu_clean={r['gpu_clean']}")
    console.print(f"  eager (export form) vs reference rel L2 {r['eager_vs_reference_rel_l2']:.3e}; "
                  f"LiteRT FP32 file vs reference {r['tflite_vs_reference_rel_l2']:.3e} "
                  f"(vs eager {r['tflite_vs_eager_rel_l2']:.3e})")
    console.print(f"  build {r['build_s']:.0f} s, export {r['export_s']:.0f} s, file {r['file_bytes'] / 1e6:.1f} MB; "
                  f"eager {r['eager_s_per_input']:.1f} s / input, "
                  f"reference {r['reference_s_per_input']:.1f} s / input; "
                  f"reference output {r['depth_range'][0]:.4g}..{r['depth_range'][1]:.4g}")
    if "fp64_error_ratio" in r:
        console.print(f"  vs upstream in float64: upstream float32 {r['reference_fp32_vs_fp64_rel_l2']:.3e}, eager "
                      f"{r['eager_vs_fp64_rel_l2']:.3e}, LiteRT FP32 file {r['tflite_vs_fp64_rel_l2']:.3e}: "
                      f"fp64_error_ratio {r['fp64_error_ratio']:.3f} (FP32 gate: at most 1.25)")
    if "gpu_runtime" in r:
        g = r["gpu_runtime"]
        console.print(f"  GPU accelerator at {g['shape']}: fully delegated {g['fully_delegated']}, "
                      f"rel L2 vs CPU {g['rel_l2_vs_cpu']}, rejected {g['rejected_ops']} {g['note'] or ''}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="da2-metric-indoor-small", help="model id(s), comma-separated")
    ap.add_argument("--size", help="export shape HxW (default: each model's)")
    ap.add_argument("--images", type=int, default=1, help="natural images from scikit-image (default 1)")
    ap.add_argument("--noise", action="store_true", help="also one N(0, 1) input")
    ap.add_argument("--no-fp64", action="store_true", help="skip the float64 reference")
    ap.add_argument("--small", help="also the real GPU accelerator on a re-export at this HxW, e.g. 126x70")
    ap.add_argument("--work", default="/tmp/depthport-metric-bench", help="folder for the exported files")
    ap.add_argument("--keep", action="store_true", help="keep the FP32 file (default: removed after measuring)")
    ap.add_argument("--json", help="append each model's figures here, one JSON object a line")
    args = ap.parse_args()
    torch.set_num_threads(2)
    console = Console(highlight=False, width=160)
    for model_id in [m.strip() for m in args.model.split(",") if m.strip()]:
        record = measure(console, args, model_id)
        show(console, record)
        if args.json:
            with open(args.json, "a") as fh:
                fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
