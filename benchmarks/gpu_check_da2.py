"""`depthport check` on Depth Anything V2 Small: the plain litert-torch conversion of transformers' model vs
depthport's export, statically at full size and on the real LiteRT GPU accelerator (SwiftShader) at a
reduced shape.

    python benchmarks/gpu_check_da2.py [--size 518x686] [--small 126x168]
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

import torch

from depthport.build import build, resolve_weights
from depthport.check.verdict import TfliteCheck, check_tflite
from depthport.core.report_model import dump
from depthport.export.litert import export_tflite
from depthport.preprocess import parse_size
from depthport.quiet import native_stderr_muted
from depthport.reference import reference_model
from depthport.registry import get_spec


def summarize(label: str, result: TfliteCheck) -> None:
    rules = Counter((v.op, v.rule, v.severity) for v in result.violations)
    print(f"\n== {label}: gpu_clean={result.gpu_clean}, ops={result.op_count}, "
          f"max rank={result.max_tensor_rank}, violations={len(result.violations)}")
    for (op, rule, severity), n in sorted(rules.items()):
        print(f"  {severity:7s} {op:18s} {rule:28s} x{n}")
    rt = result.runtime
    if rt.fully_delegated is not None or rt.note:
        print(f"  runtime: fully_delegated={rt.fully_delegated} rejected={dump(rt.rejected_ops)} "
              f"rel_l2_vs_cpu={rt.rel_l2_vs_cpu} pearson={rt.pearson_vs_cpu} shape={dump(rt.shape)} note={rt.note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="da2-small")
    ap.add_argument("--size", default="518x686")
    ap.add_argument("--small", default="126x168")
    args = ap.parse_args()
    torch.set_num_threads(2)
    spec, hw, small = get_spec(args.model), parse_size(args.size), parse_size(args.small)
    weights = resolve_weights(spec, "random")
    with tempfile.TemporaryDirectory() as tmp, native_stderr_muted():
        tmp = Path(tmp)
        plain = reference_model(spec, weights).eval()
        plain_path = export_tflite(plain, hw, tmp / "plain.tflite")
        ours_path = export_tflite(build(spec, hw, weights).model, hw, tmp / "ours.tflite")
        ours_small = export_tflite(build(spec, small, weights).model, small, tmp / "ours_small.tflite")
        plain_small = export_tflite(plain, small, tmp / "plain_small.tflite")
        results = [
            (f"plain transformers conversion {hw[0]}x{hw[1]} (static)", check_tflite(plain_path)),
            (f"depthport {hw[0]}x{hw[1]} (static + GPU run at {small[0]}x{small[1]})",
             check_tflite(ours_path, run_gpu=True, numeric_file=ours_small, timeout=600)),
            (f"plain transformers conversion {small[0]}x{small[1]} (GPU run)",
             check_tflite(plain_small, run_gpu=True, timeout=600)),
        ]
    for label, result in results:
        summarize(label, result)


if __name__ == "__main__":
    main()
