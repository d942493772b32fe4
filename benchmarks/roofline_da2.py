"""Roofline of Depth Anything V2 Small at 518x686 on this CPU, with the issue's sanity check.

Builds (or, with --reuse, keeps) the plain litert-torch conversion of transformers' model (as
benchmarks/bench_litert_da2.py makes it), depthport's FP32 and dynamic INT8 files, then runs
``depthport bench`` on them once (interleaved with the full GEMM probe; optionally ``--profile`` of the FP32
file) and checks the plain conversion's % of peak against an independent count: the MACs torch's
FlopCounterMode finds in one eager pass of the same transformers model, over the same median and the same
probe. The two must agree within 5 points.

    flock /tmp/depthport-heavy.lock .venv/bin/python benchmarks/roofline_da2.py --reuse [--profile]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from common import add_run_args, run_setup, timed
from rich.console import Console

AGREE_POINTS = 5.0
console = Console(width=170)


def build_files(args, spec, weights, hw, work: Path) -> tuple[dict[str, Path], torch.nn.Module]:
    from bench_litert_da2 import convert_to

    from depthport.build import build
    from depthport.export.files import TargetFiles
    from depthport.reference import reference_model
    from depthport.rewrites import default_rewrites

    stem = spec.id.replace("-", "_")
    files = {"plain": work / "plain.tflite", "fp32": work / f"{stem}_fp32.tflite", "int8": work / f"{stem}_int8.tflite"}
    reference = reference_model(spec, weights)
    if not (args.reuse and files["plain"].exists()):
        timed(console, "plain litert-torch (transformers)",
              lambda: convert_to(reference, torch.zeros(1, 3, *hw), files["plain"]))
    made = None
    for key, target in (("fp32", "litert-fp32"), ("int8", "litert-int8")):
        if args.reuse and files[key].exists():
            continue
        if made is None:
            built = build(spec, hw, weights, rewrites=default_rewrites("exact"))
            made = TargetFiles(built, work, stem=stem, threads=args.threads)
            if files["fp32"].exists():
                made.reuse("litert-fp32", files["fp32"])
        timed(console, f"depthport {target}", lambda t=target: made.write(t))
    return files, reference


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_args(p, size="518x686", work="/tmp/depthport-roofline-da2", warmup=1, iters=2)
    p.add_argument("--reuse", action="store_true", help="keep files already converted in --work")
    p.add_argument("--profile", action="store_true", help="also profile the FP32 file (LiteRT's op profiler)")
    p.add_argument("--check-only", action="store_true",
                   help="no build, no timing: redo the sanity check on the figures of an earlier run's --json")
    args = p.parse_args()

    from depthport.bench.roofline import count_torch
    from depthport.cli import main as depthport
    from depthport.reference import reference_model

    hw, spec, weights, work = run_setup(args)
    out = Path(args.json or work / "bench.json")
    if args.check_only:
        reference = reference_model(spec, weights)
    else:
        files, reference = build_files(args, spec, weights, hw, work)
        cmd = ["bench", *(str(files[k]) for k in ("plain", "fp32", "int8")), "--threads", str(args.threads),
               "--rounds", str(args.rounds), "--iters", str(args.iters), "--warmup", str(args.warmup), "--no-memory",
               "--json", str(out)] + (["--profile", str(files["fp32"])] if args.profile else [])
        console.print("depthport " + " ".join(cmd))
        if depthport(cmd) != 0:
            return 1
    result = json.loads(out.read_text())
    plain = result["results"][0]
    independent = count_torch(reference, (1, 3, *hw))
    rate = independent["total"] / 1e6 / plain["median"]
    pct = 100 * rate / result["probe"]["peak_gmac_per_s"]
    diff = pct - plain["pct_of_peak"]
    console.print(f"sanity check, plain conversion: % of peak from the graph's MACs ({plain['gmac']:.4g} GMAC) = "
                  f"{plain['pct_of_peak']:.1f}; from torch FlopCounterMode on transformers' model "
                  f"({independent['gmac']:.4g} GMAC, same median {plain['median']:.0f} ms, same probe) = {pct:.1f}; "
                  f"difference {diff:+.1f} points: {'agree' if abs(diff) <= AGREE_POINTS else 'DO NOT agree'} "
                  f"(limit {AGREE_POINTS:g})")
    result["sanity_check"] = {"graph_pct_of_peak": plain["pct_of_peak"], "independent_pct_of_peak": pct,
                              "independent_gmac": independent["gmac"], "independent_method": independent["method"],
                              "difference_points": diff, "agree": abs(diff) <= AGREE_POINTS}
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if abs(diff) <= AGREE_POINTS else 1


if __name__ == "__main__":
    raise SystemExit(main())
