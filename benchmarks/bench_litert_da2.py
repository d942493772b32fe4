"""Depth Anything V2 Small at 518x686 on the CPU: depthport's LiteRT files against the plain conversion.

One interleaved run, same thread count for every runtime:
- plain: ``litert_torch.convert`` of transformers' DepthAnythingForDepthEstimation (wrapper returning
  predicted_depth), no rewrites;
- depthport FP32 (default export: exact resize), depthport dynamic INT8 (``litert-int8``, if that target
  exists), depthport FP32 with ``--resize approx``;
- onnxruntime on depthport's ONNX export (the ``onnx`` target, else torch.onnx.export dynamo, opset 18);
- torch eager (transformers);
- the exact final resize alone (depthport's ``head.out_resize`` as its own LiteRT file), to size its share.

Prints latency (median/min/max over rounds x iters), ratios to the plain conversion, the FP32 speed-up,
the resize share, each file's op count, peak memory and parity with the reference on one image.
Weights are random unless --weights is given (latency does not depend on them).

    flock /tmp/depthport-heavy.lock .venv/bin/python benchmarks/bench_litert_da2.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from torch import nn

from common import add_run_args, run_setup, time_rounds, timed
from depthport.bench import Entry, paired_ratio, peak_memory
from depthport.bench.timing import MEMORY_METHOD
from depthport.build import build
from depthport.export.litert import export_tflite
from depthport.export.files import TargetFiles
from depthport.core.provenance import machine, versions
from depthport.preprocess import to_tensor
from depthport.quiet import native_stderr_muted
from depthport.reference import reference_model
from depthport.rewrites import default_rewrites
from depthport.runtimes import load_runner
from depthport.core.images import builtin_image
from depthport.core.metrics import rel_l2
from depthport.runtimes.torch import TorchRunner

console = Console(width=170)


def convert_to(model: nn.Module, sample: torch.Tensor, path: Path) -> Path:
    import litert_torch

    edge = litert_torch.convert(model.eval(), (sample,))
    edge.export(str(path))
    return path


def build_files(args, spec, weights, hw, work: Path) -> tuple[dict[str, Path], nn.Module, list[str]]:
    """Every file the run times, written into ``work``; returns (label -> path, reference module)."""
    files = {}
    stem = spec.id.replace("-", "_")

    def made(label: str, path: Path, make) -> None:
        if not (args.reuse and path.exists()):
            timed(console, label, make)
        files[label] = path

    reference = reference_model(spec, weights)
    sample = torch.zeros(1, 3, *hw)
    made("plain litert-torch (transformers)", work / "plain.tflite",
         lambda: convert_to(reference, sample, work / "plain.tflite"))
    built = build(spec, hw, weights, rewrites=default_rewrites("exact"))
    target_files = TargetFiles(built, work, stem=stem, threads=args.threads)
    made("depthport fp32", work / f"{stem}_fp32.tflite", lambda: target_files.write("litert-fp32"))
    if "litert-fp32" not in target_files.files:
        target_files.reuse("litert-fp32", work / f"{stem}_fp32.tflite")
    made("depthport int8 (dynamic)", work / f"{stem}_int8.tflite", lambda: target_files.write("litert-int8"))
    approx = build(spec, hw, weights, rewrites=default_rewrites("approx"))
    made("depthport fp32, --resize approx", work / "fp32_approx.tflite",
         lambda: export_tflite(approx.model, hw, work / "fp32_approx.tflite"))
    made("onnxruntime (depthport onnx)", work / f"{stem}.onnx", lambda: target_files.write("onnx"))
    resize = built.model.head.out_resize
    channels = built.model.head.out_conv1.out_channels
    made("final resize only (exact)", work / "final_resize_exact.tflite", lambda: convert_to(
        resize, torch.zeros(1, channels, *resize.in_hw), work / "final_resize_exact.tflite"))
    return files, reference



def op_count(path: Path) -> str:
    if path.suffix == ".tflite":
        from depthport.core.tflite_graph import graph_summary

        return str(graph_summary(path)["op_count"])
    if path.suffix == ".onnx":
        import onnx

        return str(sum(n.op_type != "Constant" for n in onnx.load(str(path)).graph.node))
    return "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_args(p, size="518x686", work="/tmp/depthport-bench-da2", warmup=2, iters=3)
    p.add_argument("--reuse", action="store_true", help="keep files already converted in --work")
    p.add_argument("--no-memory", action="store_true")
    args = p.parse_args()

    hw, spec, weights, work = run_setup(args)
    files, reference = build_files(args, spec, weights, hw, work)

    entries, x_image = [], to_tensor(builtin_image("astronaut"), hw)
    with native_stderr_muted():
        for label, path in files.items():
            runner = load_runner(path, threads=args.threads)
            x = np.zeros(runner.input_shape, np.float32) if "resize only" in label else x_image
            entries.append(Entry(label, runner, x))
    entries.append(Entry("torch eager (transformers)", TorchRunner(reference, hw, args.threads), x_image))

    ref_depth = np.asarray(entries[-1].runner.run(x_image)).reshape(hw)
    parity = {e.label: rel_l2(np.asarray(e.runner.run(e.x)).reshape(hw), ref_depth)
              for e in entries if "resize only" not in e.label}
    records = time_rounds(console, entries, args)
    memory = {}
    if not args.no_memory:
        with console.status("peak memory"):
            memory = {label: peak_memory(path, args.threads) for label, path in files.items()}

    by = {r["label"]: r for r in records}
    table = Table(title=f"{spec.id} {hw[0]}x{hw[1]}, CPU, {args.threads} threads, {args.rounds} "
                        f"interleaved rounds x {args.iters} calls after {args.warmup} warm-ups")
    for col in ("runtime / file", "median ms", "min ms", "max ms", "CPU ms", "x plain", "x plain paired",
                "x plain min", "ops", "MB", "peak RSS MB", "RSS delta MB", "rel L2 vs ref"):
        table.add_column(col)
    plain = by["plain litert-torch (transformers)"]
    for r in records:
        path = files.get(r["label"])
        mem = memory.get(r["label"], {})
        table.add_row(r["label"], f"{r['median']:.1f}", f"{r['min']:.1f}", f"{r['max']:.1f}", f"{r['cpu_median']:.0f}",
                      f"{r['median'] / plain['median']:.3f}", f"{paired_ratio(r, plain):.3f}", f"{r['min'] / plain['min']:.3f}",
                      op_count(path) if path else "-", f"{path.stat().st_size / 1e6:.1f}" if path else "-",
                      f"{mem['peak_rss_mb']:.0f}" if "peak_rss_mb" in mem else "-",
                      f"{mem['delta_mb']:.0f}" if "delta_mb" in mem else "-",
                      f"{parity[r['label']]:.2e}" if r["label"] in parity else "-")
    console.print(table)

    fp32, approx = by["depthport fp32"], by["depthport fp32, --resize approx"]
    resize_only = by["final resize only (exact)"]
    summary = {}
    for stat in ("median", "min", "cpu_median"):
        summary[f"fp32_latency_reduction_vs_plain_{stat}"] = 1 - fp32[stat] / plain[stat]
        summary[f"exact_minus_approx_share_{stat}"] = (fp32[stat] - approx[stat]) / fp32[stat]
        summary[f"final_resize_alone_share_{stat}"] = resize_only[stat] / fp32[stat]
    summary["fp32_latency_reduction_vs_plain_paired"] = 1 - paired_ratio(fp32, plain)
    summary["exact_minus_approx_share_paired"] = 1 - paired_ratio(approx, fp32)
    summary["final_resize_alone_share_paired"] = paired_ratio(resize_only, fp32)
    for stat in ("median", "paired", "min", "cpu_median"):
        cut = summary[f"fp32_latency_reduction_vs_plain_{stat}"]
        console.print(f"{stat:>10}: depthport FP32 vs plain conversion: {cut:.1%} lower latency "
                      f"({1 / (1 - cut):.3f}x faster); target >= 15 %: {'met' if cut >= 0.15 else 'NOT met'}; "
                      f"exact final resize alone: {summary[f'final_resize_alone_share_{stat}']:.1%} of FP32, "
                      f"exact minus approx export: {summary[f'exact_minus_approx_share_{stat}']:.1%}")
    m = machine()
    console.print(f"peak memory: {MEMORY_METHOD}")
    console.print(f"machine: {m['cpu']}, {m['cores']} cores, {m['os']}")
    console.print("versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()))
    if args.weights == "random":
        console.print("weights: random (seed 0); latency does not depend on them, parity is vs a random reference")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": records, "summary": summary, "parity_rel_l2": parity,
                                               "memory": memory, "machine": m,
                                               "versions": versions()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
