"""Depth Anything V2 Small at 518x518 on the CPU: depthport's ExecuTorch and ONNX files against the plain .pte.

One run, same thread count for every runtime:
- plain: transformers' DepthAnythingForDepthEstimation (wrapper returning predicted_depth) through
  torch.export -> to_edge_transform_and_lower(XnnpackPartitioner()) -> .pte, nothing else;
- depthport ``xnnpack-fp32``, ``xnnpack-fp16``, ``xnnpack-int8``, ``onnx`` (onnxruntime) and ``coreml``
  (built and checked for structure only: Core ML does not run on Linux);
- torch eager (depthport's model) for reference.

Prints, per file: size, delegation (ops on the delegate / left on portable kernels, subgraphs, which ops),
parity with depthport's fp32 eager model over scikit-image's bundled images (the plain file against
transformers' eager model), and latency (median/min/max over interleaved rounds). Weights are random unless
--weights is given (latency and delegation do not depend on them).

    flock /tmp/depthport-heavy.lock .venv/bin/python benchmarks/bench_executorch_da2.py
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
from depthport.bench import Entry
from depthport.build import build
from depthport.export.delegation import delegation_report
from depthport.export.files import TargetFiles
from depthport.core.provenance import machine, versions
from depthport.core.report_model import Artifact, load
from depthport.preprocess import to_tensor
from depthport.quiet import native_stderr_muted
from depthport.reference import reference_model
from depthport.runtimes import load_runner
from depthport.core.images import builtin_set
from depthport.core.metrics import image_metrics, summarize
from depthport.runtimes.torch import TorchRunner

console = Console(width=190)
PLAIN = "plain .pte (transformers, XNNPACK fp32)"
TARGETS = {"xnnpack-fp32": "depthport xnnpack-fp32", "xnnpack-fp16": "depthport xnnpack-fp16",
           "xnnpack-int8": "depthport xnnpack-int8", "onnx": "depthport onnx (onnxruntime)",
           "coreml": "depthport coreml (.pte + .mlpackage)"}


def plain_pte(model: nn.Module, sample: torch.Tensor, path: Path) -> dict:
    """The straightforward recipe: export, lower with the XNNPACK partitioner, write."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    with torch.no_grad():
        edge = to_edge_transform_and_lower(torch.export.export(model.eval(), (sample,)),
                                           partitioner=[XnnpackPartitioner()])
    report = delegation_report(edge.exported_program().graph_module)
    path.write_bytes(edge.to_executorch().buffer)
    return {"file": path.name, "target": "plain", "bytes": path.stat().st_size, "precision": "fp32",
            "delegation": report}


def parity(runner, images, refs) -> dict:
    return summarize([image_metrics(np.asarray(runner.run(x)), ref) for x, ref in zip(images, refs)])


def cell(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def delegation_cells(entry: Artifact) -> tuple[str, str, str]:
    d = entry.delegation
    if not d:
        return "-", "-", f"{entry.op_count} ONNX ops" if entry.op_count is not None else "-"
    ops = ", ".join(f"{op.removeprefix('aten_').removesuffix('_default')} x{n}" for op, n in d.portable_ops.items())
    total = d.delegated + d.portable
    return f"{d.delegated}/{total} ({d.coverage:.1%})", str(d.subgraphs), ops or "none"


def size_cell(entry: Artifact) -> str:
    """The file's MB (and its Core ML package's)."""
    package = entry.mlpackage.bytes if entry.mlpackage else 0
    if not entry.bytes + package:
        return "-"
    return f"{entry.bytes / 1e6:.1f}" + (f" + {package / 1e6:.1f}" if entry.mlpackage else "")


def results_table(spec, hw, built, args, n_images: int, entries: dict, results: dict, by: dict) -> Table:
    """One row per file (and depthport's eager model): size, delegation, parity, latency."""
    table = Table(title=f"{spec.id} {hw[0]}x{hw[1]} ({'random' if built.weights.random else 'real'} weights), CPU, "
                        f"{args.threads} threads, {args.rounds} interleaved rounds x {args.iters} calls after "
                        f"{args.warmup} warm-up; parity over {n_images} images")
    for col in ("file", "prec", "MB", "delegated (coverage)", "subgr", "left on portable kernels", "worst r",
                "pooled relL2", "worst δ<1.25", "median ms", "min", "max", "x plain"):
        table.add_column(col, overflow="fold")
    plain_ms = by[PLAIN]["median"]
    rows = [(label, load(Artifact, e)) for label, e in entries.items()]
    for label, entry in rows + [("torch eager (depthport model)", Artifact(file=""))]:
        r, q = by.get(label, {}), results.get(label, {})
        table.add_row(label, entry.precision, size_cell(entry), *delegation_cells(entry),
                      cell(q.get("pearson_worst"), ".6f"),
                      cell(q.get("rel_l2_pooled"), ".2e"), cell(q.get("delta125_worst"), ".4f"),
                      cell(r.get("median"), ".0f"), cell(r.get("min"), ".0f"), cell(r.get("max"), ".0f"),
                      cell(plain_ms / r["median"] if r else None, ".2f"))
    return table


def print_checks(results: dict, by: dict) -> dict:
    """The issue's targets, each met or not; returns {target: value}."""
    plain_ms = by[PLAIN]["median"]
    summary = {}
    checks = [("xnnpack-fp32", "speed-up vs plain >= 1.5x", lambda lb: plain_ms / by[lb]["median"], 1.5),
              ("xnnpack-fp32", "worst r >= 0.99999", lambda lb: results[lb]["pearson_worst"], 0.99999),
              ("xnnpack-fp16", "worst r >= 0.9999", lambda lb: results[lb]["pearson_worst"], 0.9999),
              ("xnnpack-fp16", "not slower than plain fp32 (plain / fp16 >= 1)",
               lambda lb: plain_ms / by[lb]["median"], 1.0),
              ("onnx", "worst r >= 0.99999", lambda lb: results[lb]["pearson_worst"], 0.99999)]
    for target, what, value, bound in checks:
        label = TARGETS[target]
        if label in by:
            v = value(label)
            summary[f"{target}: {what}"] = v
            console.print(f"{target}: {what}: {v:.6g} -> {'met' if v >= bound else 'NOT met'}")
    if TARGETS["xnnpack-int8"] in results:
        q = results[TARGETS["xnnpack-int8"]]
        console.print(f"xnnpack-int8: δ<1.25 median {q['delta125_median']:.4f}, worst {q['delta125_worst']:.4f} "
                      f"(the int8 gate judges this)")
    return summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_args(p, size="518x518", work="/tmp/depthport-bench-executorch", warmup=1, iters=1)
    p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated subset of " + ",".join(TARGETS))
    args = p.parse_args()

    hw, spec, weights, work = run_setup(args)
    sample = torch.zeros(1, 3, *hw)

    reference = reference_model(spec, weights)
    entries = {PLAIN: timed(console, "plain .pte",
                            lambda: plain_pte(reference, sample, work / "plain_transformers_xnnpack_fp32.pte"))}
    built = build(spec, hw, weights)
    files = TargetFiles(built, work, threads=args.threads, fp16_sim=True)
    for name in [t.strip() for t in args.targets.split(",") if t.strip()]:
        entries[TARGETS[name]] = timed(console, TARGETS[name], lambda: files.write(name))

    names = [name for name, _ in builtin_set()]
    images = [to_tensor(img, hw) for _, img in builtin_set()]
    eager = TorchRunner(built.model, hw, args.threads)
    stock_eager = TorchRunner(reference, hw, args.threads, runtime="torch-eager (transformers)")
    with console.status("reference depth maps"):
        refs = [eager.run(x) for x in images]
        stock_refs = [stock_eager.run(x) for x in images]
    results = {"eager vs transformers": summarize([image_metrics(a, b) for a, b in zip(refs, stock_refs)])}

    runners = {}
    with native_stderr_muted():
        for label, entry in entries.items():
            entry = load(Artifact, entry)
            if entry.runnable_here:
                runners[label] = load_runner(work / entry.file, threads=args.threads)
    with console.status("parity"):
        for label, runner in runners.items():
            results[label] = parity(runner, images, stock_refs if label == PLAIN else refs)

    timing = [Entry(label, runner, images[0]) for label, runner in runners.items()]
    timing.append(Entry("torch eager (depthport model)", eager, images[0]))
    records = time_rounds(console, timing, args)
    by = {r["label"]: r for r in records}

    console.print(results_table(spec, hw, built, args, len(images), entries, results, by))
    e = results["eager vs transformers"]
    console.print(f"depthport eager vs transformers eager: worst r {e['pearson_worst']:.7f}, pooled rel L2 "
                  f"{e['rel_l2_pooled']:.2e} (parity column: the plain file vs transformers eager, every other "
                  f"file vs depthport eager)")
    summary = print_checks(results, by)
    m, v = machine(), versions()
    console.print(f"images: scikit-image bundled {', '.join(names)}; parity metrics per depthport.core.metrics")
    console.print(f"machine: {m['cpu']}, {m['cores']} cores, {m['os']}")
    console.print("versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"entries": entries, "parity": results, "timing": records,
                                               "summary": summary, "machine": m, "versions": v}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
