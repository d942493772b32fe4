"""Where ExecuTorch loses to onnxruntime on Depth Anything V2 Small at 518x518: the same graph, three runtimes.

From one depthport build (the export's default rewrites), the files ``xnnpack-fp32`` (.pte, ExecuTorch's
XNNPACK delegate), ``onnx`` (onnxruntime's CPU provider, MLAS kernels) and ``litert-fp32`` (.tflite, LiteRT's
XNNPACK delegate) are timed in the same interleaved rounds, then each is profiled by its runtime's own tool, as
``depthport bench --profile`` does (``depthport.bench.profile_runtimes``):
- ExecuTorch: ETDump; its XNNPACK delegate reports one event per XNNPACK operator;
- onnxruntime: its profiler, one event per graph node (after onnxruntime's own fusions);
- LiteRT: its op profiler, one event per XNNPACK operator.
Per-op times are grouped into the same categories (``category``) and printed side by side (mean ms per run over
the profiled runs), with the number of operators of each category, so a gap shows where it sits: in kernels
that do the same work at a different speed (the runtime), or in operators one graph has and the other not
(the graph).

    flock /tmp/depthport-heavy.lock .venv/bin/python benchmarks/executorch_gap.py [--reuse]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from common import add_run_args, run_setup, time_rounds, timed
from depthport.bench import paired_ratio

console = Console(width=170)
FILES = {"executorch": ("xnnpack-fp32", "_xnnpack_fp32.pte"), "onnxruntime": ("onnx", ".onnx"),
         "litert": ("litert-fp32", "_fp32.tflite")}
# (category, substrings of XNNPACK operator names, ONNX op types), first match wins
CATEGORIES = (
    ("GEMM with weights (FC, 1x1)", ("Fully Connected",), ()),
    ("attention matmuls", ("Batch Matrix Multiply",), ()),
    ("convolutions", ("Convolution", "Deconvolution", "DWConv"), ("Conv", "ConvTranspose")),
    ("softmax", ("Softmax",), ("Softmax",)),
    ("normalization", (), ("LayerNormalization", "SkipLayerNormalization", "ReduceMean")),
    ("data movement", ("Transpose", "Copy", "Slice", "Concatenat", "Reshape", "Split", "Pad", "Even Split"),
     ("Transpose", "Reshape", "Concat", "Slice", "Split", "Gather", "Pad", "Expand", "Squeeze", "Unsqueeze",
      "Flatten", "Identity", "ReorderInput", "ReorderOutput")),
    ("resize", ("Resize",), ("Resize",)),
)
OTHER = "elementwise and the rest"


def category(name: str, onnx_inputs: int | None = None) -> str:
    """The category of an XNNPACK operator or portable kernel name, or of an onnxruntime node (``onnx_inputs``:
    how many inputs its profile event lists; a prepacked weight is not listed)."""
    if onnx_inputs is not None:
        if name == "Gemm":
            return CATEGORIES[0][0]
        if name in ("MatMul", "FusedMatMul"):
            return CATEGORIES[1][0] if onnx_inputs >= 2 else CATEGORIES[0][0]
        return next((label for label, _, ops in CATEGORIES if name in ops), OTHER)
    return next((label for label, needles, _ in CATEGORIES if any(n in name for n in needles)), OTHER)


def by_category(rows, onnx: bool = False) -> dict:
    """category -> {"ms", "ops", "kinds": {operator kind: {"ms", "ops"}}} per run, from (kind, ms per run, ops
    per run, inputs its onnxruntime event lists) rows."""
    out: dict = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for kind, ms, ops, inputs in rows:
        acc = out[category(kind, inputs if onnx else None)][kind]
        acc[0] += ms
        acc[1] += ops
    return {cat: {"ms": sum(ms for ms, _ in kinds.values()), "ops": round(sum(n for _, n in kinds.values())),
                  "kinds": {k: {"ms": ms, "ops": round(n)} for k, (ms, n) in sorted(kinds.items(), key=lambda i: -i[1][0])}}
            for cat, kinds in out.items()}


def event_rows(events: list[dict], runs: int) -> list[tuple]:
    from depthport.bench.profile import DEFAULT

    return [(e["tag"], e["us"] / 1e3 / runs, 1 / runs, e.get("inputs", 0)) for e in events if e["type"] != DEFAULT]


def profiles(files: dict[str, Path], threads: int, runs: int, warmup: int) -> tuple[dict, dict]:
    """runtime -> by_category of its own profiler's events (ETDump, onnxruntime's profiler, LiteRT's profiler)."""
    from depthport.bench.profile import profile_tflite
    from depthport.bench.profile_runtimes import executorch_events, onnx_events

    out = {"executorch": timed(console, "ETDump", lambda: by_category(
               event_rows(executorch_events(str(files["executorch"]), threads, runs, warmup), runs))),
           "onnxruntime": timed(console, "onnxruntime profiler", lambda: by_category(
               event_rows(onnx_events(str(files["onnxruntime"]), threads, runs, warmup), runs), onnx=True))}
    litert = timed(console, "LiteRT profiler", lambda: profile_tflite(files["litert"], threads, runs, warmup))
    if "error" in litert:
        raise RuntimeError(f"LiteRT profiler: {litert['error']}")
    out["litert"] = by_category([(t["type"], t["ms"], t["ops"], 0) for t in litert["by_type"]])
    return out, litert


def build_files(args, spec, weights, hw, work: Path) -> dict[str, Path]:
    from depthport.build import build
    from depthport.export.files import TargetFiles

    stem = spec.id.replace("-", "_")
    files = {runtime: work / f"{stem}{suffix}" for runtime, (_, suffix) in FILES.items()}
    missing = [rt for rt, f in files.items() if not (args.reuse and f.exists())]
    if missing:
        built = build(spec, hw, weights)
        made = TargetFiles(built, work, stem=stem, threads=args.threads)
        for runtime in missing:
            target = FILES[runtime][0]
            timed(console, f"depthport {target}", lambda t=target: made.write(t))
    return files


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_args(p, size="518x518", work="/tmp/depthport-executorch-gap", warmup=1, iters=2)
    p.add_argument("--reuse", action="store_true", help="keep files already exported in --work")
    p.add_argument("--profile-runs", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    from depthport.bench import Entry
    from depthport.core.machine import describe, machine_info
    from depthport.preprocess import to_tensor
    from depthport.quiet import native_stderr_muted
    from depthport.core.provenance import versions
    from depthport.runtimes import load_runner
    from depthport.core.images import builtin_image

    hw, spec, weights, work = run_setup(args)
    files = build_files(args, spec, weights, hw, work)
    x = to_tensor(builtin_image("chelsea"), hw)
    with native_stderr_muted():
        entries = [Entry(rt, load_runner(path, threads=args.threads), x) for rt, path in files.items()]
    records = time_rounds(console, entries, args)
    by = {r["label"]: r for r in records}
    with native_stderr_muted():
        by_runtime, litert_raw = profiles(files, args.threads, args.profile_runs, 2)

    ratio = paired_ratio(by["executorch"], by["onnxruntime"])
    table = Table(title=f"{spec.id} {hw[0]}x{hw[1]}, {args.threads} threads: ms per run by category (operators)")
    table.add_column("category")
    for rt in FILES:
        table.add_column(rt, justify="right")
    table.add_column("ExecuTorch - onnxruntime", justify="right")
    cats = [c for c, _, _ in CATEGORIES] + [OTHER]
    for cat in cats + ["sum of operators"]:
        cells = []
        for rt in FILES:
            prof = by_runtime[rt]
            ms = sum(v["ms"] for v in prof.values()) if cat == "sum of operators" else prof.get(cat, {}).get("ms", 0.0)
            ops = sum(v["ops"] for v in prof.values()) if cat == "sum of operators" else prof.get(cat, {}).get("ops", 0)
            cells.append((ms, ops))
        table.add_row(cat, *(f"{ms:.1f} ({ops})" for ms, ops in cells), f"{cells[0][0] - cells[1][0]:+.1f}")
    table.add_row("median of the timed calls", *(f"{by[rt]['median']:.1f}" for rt in FILES),
                  f"{by['executorch']['median'] - by['onnxruntime']['median']:+.1f}")
    console.print(table)
    console.print(f"ExecuTorch / onnxruntime, paired per round: {ratio:.3f}; LiteRT / onnxruntime: "
                  f"{paired_ratio(by['litert'], by['onnxruntime']):.3f}")
    for rt in FILES:
        console.print(f"{rt}: " + "; ".join(
            f"{c}: " + ", ".join(f"{n} {k['ms']:.1f} ms x{k['ops']}" for n, k in v["kinds"].items())
            for c, v in by_runtime[rt].items()))
    machine = machine_info(args.threads)
    console.print(f"machine: {describe(machine)}; versions: {versions()}")
    if args.json:
        Path(args.json).write_text(json.dumps({"timing": records, "profiles": by_runtime, "litert_profile": litert_raw,
                                               "executorch_over_onnxruntime": ratio, "machine": machine,
                                               "versions": versions()}, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
