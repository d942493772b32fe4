"""Depth Anything V2 Small at 518x686: depthport's LiteRT variants side by side (FP32, FP16, INT8).

Exports litert-fp32, litert-fp16, litert-int8 and litert-int8-weight as `depthport export` does, plus the
published recipe for comparison ("int8, all ops": dynamic_wi8_afp32 on every op, norms and resizes
included). Then, with the same thread count for every file:
- parity over an image set (scikit-image's bundled natural images by default, preprocessed with
  depthport.preprocess.to_tensor at the export size): worst Pearson vs the FP32 file, pooled relative L2 and
  worst delta<1.25 vs the upstream PyTorch reference (transformers, same weights);
- CPU latency: interleaved rounds, medians (depthport.bench.timing);
- the GPU verdict (gpu_ok: static, plus the real accelerator with --run-gpu) and the FP16-compute
  prediction of the export (chelsea, export shape);
and prints issue 5's targets with the measured figure next to each, the machine and the versions.
Weights are random unless --weights is given: INT8 error depends on the weights, so with random weights the
INT8 parity figures are not comparable with the published ones.

    flock /tmp/depthport-heavy.lock .venv/bin/python benchmarks/bench_litert_variants.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from common import add_run_args, run_setup, time_rounds, timed
from depthport.bench import Entry
from depthport.build import build
from depthport.check.files import check_tflite_file
from depthport.check.verdict import gpu_outcome
from depthport.export.litert_variants import int8_recipe, quantize
from depthport.export.files import TargetFiles
from depthport.core.provenance import machine, versions
from depthport.core.report_model import Artifact, load
from depthport.preprocess import to_tensor
from depthport.quiet import native_stderr_muted
from depthport.reference import reference_model
from depthport.runtimes import load_runner
from depthport.core.images import image_set
from depthport.core.metrics import image_metrics, pearson, summarize

console = Console(width=180)
TARGETS = ("litert-fp32", "litert-fp16", "litert-int8", "litert-int8-weight")
PUBLISHED_INT8_REL_L2 = 0.02080  # published-exports.md B, CPU, 100 natural images


def export_all(args, spec, weights, hw, work: Path) -> tuple[dict[str, dict], object]:
    """label -> artifact entry (file in ``work``); the built model."""
    built = build(spec, hw, weights)
    files = TargetFiles(built, work, threads=args.threads, fp16_sim=not args.no_fp16_sim, run_gpu=args.run_gpu)
    entries = {name: timed(console, f"export {name}", lambda name=name: files.write(name)) for name in TARGETS}
    plain = work / f"{files.stem}_int8_all_ops.tflite"
    timed(console, "export int8, all ops",
          lambda: plain.write_bytes(quantize(files.files["litert-fp32"], int8_recipe(None))))
    entries["int8, all ops (published recipe)"] = files.entry(plain, "int8-all-ops", precision="int8")
    for label, entry in entries.items():
        timed(console, f"check {label}", lambda entry=entry: check_tflite_file(files, entry))
    return entries, built


def parity(files: dict[str, Path], reference, images, hw, threads: int) -> dict[str, dict]:
    """Per file: summary vs the reference over the images, and worst Pearson vs the FP32 file."""
    outputs: dict[str, list[np.ndarray]] = {label: [] for label in files}
    refs = []
    with native_stderr_muted():
        runners = {label: load_runner(path, threads=threads) for label, path in files.items()}
        for _, image in images:
            x = to_tensor(image, hw)
            with torch.no_grad():
                refs.append(np.asarray(reference(torch.from_numpy(x))).reshape(hw))
            for label, runner in runners.items():
                outputs[label].append(np.asarray(runner.run(x)).reshape(hw))
    fp32 = outputs["litert-fp32"]
    result = {}
    for label, outs in outputs.items():
        result[label] = summarize([image_metrics(o, r) for o, r in zip(outs, refs)])
        result[label]["pearson_vs_fp32_worst"] = min(pearson(o, f) for o, f in zip(outs, fp32))
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_args(p, size="518x686", work="/tmp/depthport-bench-variants", warmup=2, iters=2)
    p.add_argument("--images", help="image folder (default: scikit-image's bundled natural images)")
    p.add_argument("--no-fp16-sim", action="store_true", help="skip the FP16-compute prediction")
    p.add_argument("--run-gpu", action="store_true",
                   help="also run the GPU check on the LiteRT GPU accelerator (SwiftShader), numbers at a small shape")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    hw, spec, weights, work = run_setup(args)
    entries, built = export_all(args, spec, weights, hw, work)
    arts = {label: load(Artifact, e) for label, e in entries.items()}
    gpu = {label: gpu_outcome(e) for label, e in entries.items()}
    files = {label: work / a.file for label, a in arts.items()}
    set_name, images = image_set(args.images)
    reference = reference_model(spec, weights)
    figures = timed(console, f"parity over {len(images)} images", lambda: parity(files, reference, images, hw, args.threads))

    x = to_tensor(images[0][1], hw)
    with native_stderr_muted():
        timing = [Entry(label, load_runner(path, threads=args.threads), x) for label, path in files.items()]
    records = time_rounds(console, timing, args)
    latency = {r["label"]: r for r in records}

    table = Table(title=f"{spec.id} {hw[0]}x{hw[1]}, {'random' if weights.random else args.weights} weights, "
                        f"CPU {args.threads} threads, {len(images)} images ({set_name})")
    for col in ("file", "prec.", "MB", "ops", "Pearson vs fp32 (worst)", "rel L2 vs ref (pooled)",
                "δ<1.25 vs ref (worst)", "median ms", "x fp32", "gpu_ok", "FP16 compute: rel L2", "needs enforce_f32"):
        table.add_column(col)
    base = latency["litert-fp32"]["median"]
    for label, art in arts.items():
        fig, lat, fp16 = figures[label], latency[label], art.fp16_compute
        table.add_row(art.file.removesuffix(".tflite"), art.precision, f"{art.bytes / 1e6:.2f}", str(art.op_count),
                      f"{fig['pearson_vs_fp32_worst']:.6f}", f"{fig['rel_l2_pooled']:.3e}",
                      f"{fig['delta125_worst']:.4f}", f"{lat['median']:.0f}", f"{lat['median'] / base:.3f}",
                      str(gpu[label][0].ok), f"{fp16.rel_l2:.2e}" if fp16 else "-",
                      str(fp16.needs_enforce_f32) if fp16 else "-")
    console.print(table)

    fp16, int8 = arts["litert-fp16"], arts["litert-int8"]
    prediction = arts["litert-fp32"].fp16_compute
    checks = [
        ("FP16 worst Pearson vs FP32 >= 0.9999", figures["litert-fp16"]["pearson_vs_fp32_worst"] >= 0.9999,
         f"{figures['litert-fp16']['pearson_vs_fp32_worst']:.6f}"),
        ("FP16 size <= 52 MB", fp16.bytes <= 52e6, f"{fp16.bytes / 1e6:.2f} MB"),
        ("INT8 size <= 28.5 MB", int8.bytes <= 28.5e6, f"{int8.bytes / 1e6:.2f} MB"),
        (f"INT8 pooled rel L2 vs reference < published {PUBLISHED_INT8_REL_L2:.2%}",
         figures["litert-int8"]["rel_l2_pooled"] < PUBLISHED_INT8_REL_L2,
         f"{figures['litert-int8']['rel_l2_pooled']:.3%} (all-ops recipe "
         f"{figures['int8, all ops (published recipe)']['rel_l2_pooled']:.3%}; random weights: not comparable)"),
        ("INT8 CPU median not slower than FP32", latency["litert-int8"]["median"] <= base,
         f"{latency['litert-int8']['median']:.0f} ms vs {base:.0f} ms"),
    ]
    for name, ok, value in checks:
        console.print(f"[{'green' if ok else 'red'}]{'PASS' if ok else 'MISS'}[/] {name}: {value}")
    if prediction:
        console.print(f"FP16 compute (predicted, {', '.join(prediction.images)}): rel L2 {prediction.rel_l2:.2e}, "
                      f"Pearson {prediction.pearson:.6f}, overflow layers "
                      f"{', '.join(map(str, prediction.overflow_layers)) or 'none'}, first bad layer "
                      f"{prediction.first_bad_layer}, largest FP32 activation {prediction.max_abs_fp32:.0f} "
                      f"({prediction.max_abs_layer}), needs enforce_f32: {prediction.needs_enforce_f32}")
    for label, (decided, why) in gpu.items():
        if not decided.ok:
            console.print(f"not for GPU: {arts[label].file}: {why}")
    console.print(f"machine: {machine()}")
    console.print(f"versions: {versions()}")
    console.print(f"latency: {args.rounds} interleaved rounds x {args.iters} calls after {args.warmup} warm-ups; "
                  f"delta<1.25: depthport.core.metrics")
    if args.json:
        Path(args.json).write_text(json.dumps({"entries": entries, "parity": figures, "latency": records,
                                               "machine": machine(), "versions": versions()}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
