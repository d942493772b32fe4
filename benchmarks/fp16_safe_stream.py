"""What ``fp16_safe_stream`` (Depth Anything V2's residual stream carried k times smaller) changes, in one run: the
default rewrites with and without it, on the same random weights.

For each form: the .tflite op count and its parity against depthport's eager FP32 model on the six built-in images
(the eager outputs of the two forms are compared bit for bit), and the FP16 predictions (GPU default FP16 and
XNNPACK's f16 kernels) on the first ``--images`` built-in images (0: none). ``--scales 4,8`` adds the forms with those k
instead of the default (the power of two nearest sqrt(C)), predictions only.

    python benchmarks/fp16_safe_stream.py [--model da2-small] [--size 518x686] [--images 2] [--scales 4,8]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

import depthport.fp16.safe as safe
from depthport.build import build
from depthport.check.fp16_compute import predict_fp16
from depthport.core.images import image_set
from depthport.core.machine import describe, machine_info
from depthport.core.metrics import pooled_rel_l2
from depthport.core.tflite_graph import graph_summary
from depthport.export.litert import export_tflite
from depthport.preprocess import parse_size, to_tensor
from depthport.registry import get_spec
from depthport.rewrites import default_rewrites
from depthport.runtimes import load_runner


def predictions(model, hw, images) -> str:
    if not images:
        return "FP16 predictions skipped (--images 0)"
    gpu = predict_fp16(model, hw, accumulate="fp16", images=images)["figures"]
    xnn = predict_fp16(model, hw, accumulate="xnnpack", images=images)["figures"]
    return (f"GPU default FP16 {gpu['rel_l2_pooled']:.4e}; XNNPACK f16 {xnn['rel_l2_pooled']:.4e}, "
            f"worst delta<1.25 {xnn['delta125_worst']:.4f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="da2-small")
    p.add_argument("--size", default="518x686")
    p.add_argument("--images", type=int, default=2)
    p.add_argument("--scales", default="", help="further k to predict with, e.g. 4,8")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(describe(machine_info(args.threads)))
    spec, hw = get_spec(args.model), parse_size(args.size)
    _, images = image_set(None)
    names = default_rewrites()
    forms = {"with fp16_safe_stream": names, "without": [n for n in names if n != "fp16_safe_stream"]}
    xs = [torch.from_numpy(to_tensor(image, hw)) for _, image in images]
    first = None
    for label, rewrites in forms.items():
        model = build(spec, hw, "random", rewrites=rewrites).model
        with torch.no_grad():
            eager = [model(x).numpy() for x in xs]
        first = first or eager
        path = export_tflite(model, hw, Path(tempfile.mkdtemp()) / "model.tflite")
        runner = load_runner(path, threads=args.threads)
        files = [runner.run(x.numpy()) for x in xs]
        same = all((a == b).all() for a, b in zip(eager, first))
        print(f"{label}: {graph_summary(path)['op_count']} ops; eager outputs bit-identical to the first form: {same}; "
              f"file vs its eager, pooled rel. L2 over {len(xs)} images {pooled_rel_l2(zip(files, eager)):.4e}; "
              f"{predictions(model, hw, images[:args.images])}", flush=True)
    default_scale = safe.default_scale
    for k in [int(v) for v in args.scales.split(",") if v.strip()]:
        safe.default_scale = lambda dim, k=k: k
        model = build(spec, hw, "random", rewrites=names).model
        print(f"k = {k}: {predictions(model, hw, images[:args.images])}", flush=True)
    safe.default_scale = default_scale


if __name__ == "__main__":
    main()
