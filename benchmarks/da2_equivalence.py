"""Depth Anything V2 (real config, random weights): depthport vs transformers, and the LiteRT file's graph.

Prints, for each shape: our eager model (export form) vs transformers' DepthAnythingForDepthEstimation with the
same weights, the exported FP32 .tflite vs both, and the file's op count, histogram, banned ops and max rank.

    python benchmarks/da2_equivalence.py [--model da2-small] [--sizes 518x518,518x686] [--images N]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from depthport.build import build, resolve_weights
from depthport.core.tflite_graph import graph_summary
from depthport.export.litert import export_tflite
from depthport.preprocess import parse_size, to_tensor
from depthport.quiet import native_stderr_muted
from depthport.reference import reference_model
from depthport.registry import get_spec
from depthport.runtimes import load_runner
from depthport.core.metrics import rel_l2

BANNED = ("GATHER_ND", "BROADCAST_TO", "TRANSPOSE_CONV", "SELECT_V2", "CAST", "RESIZE_BILINEAR")


def natural_images(n: int):
    import skimage.data as data
    from PIL import Image

    names = ["astronaut", "coffee", "chelsea", "rocket", "motorcycle_left", "hubble_deep_field"][:n]
    return [(name, Image.fromarray(getattr(data, name)()).convert("RGB")) for name in names]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="da2-small")
    ap.add_argument("--sizes", default="518x518,518x686")
    ap.add_argument("--images", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(2)
    spec = get_spec(args.model)
    weights = resolve_weights(spec, "random")
    reference = reference_model(spec, weights)
    images = natural_images(args.images)
    for hw in (parse_size(s) for s in args.sizes.split(",")):
        built = build(spec, hw, weights, pos_formula="transformers")
        with tempfile.TemporaryDirectory() as tmp, native_stderr_muted():
            path = export_tflite(built.model, hw, Path(tmp) / "m.tflite")
            summary = graph_summary(path)
            runner = load_runner(path)
            rows = []
            for name, img in images:
                x = torch.from_numpy(to_tensor(img, hw))
                with torch.no_grad():
                    ours, theirs = built.model(x), reference(x)
                lite = runner.run(x.numpy())
                rows.append((name, rel_l2(ours, theirs), rel_l2(lite, ours), rel_l2(lite, theirs), theirs))
            size = path.stat().st_size
        print(f"\n== {spec.id} {hw[0]}x{hw[1]} (random weights, transformers position-embedding formula)")
        for name, a, b, c, _ in rows:
            print(f"  {name:18s} eager vs transformers {a:.3e} | tflite vs eager {b:.3e} | tflite vs transformers {c:.3e}")
        print(f"  worst: eager vs transformers {max(r[1] for r in rows):.3e}, tflite vs eager {max(r[2] for r in rows):.3e},"
              f" tflite vs transformers {max(r[3] for r in rows):.3e}")
        print(f"  file {size / 1e6:.1f} MB, ops {summary['op_count']}, max tensor rank {summary['max_tensor_rank']}")
        print(f"  banned ops: {({k: summary['op_histogram'].get(k, 0) for k in BANNED})}")
        print(f"  histogram: {summary['op_histogram']}")
        print(f"  reference output spread: mean {float(rows[0][4].mean()):.3f}, std {float(rows[0][4].std()):.3f}")


if __name__ == "__main__":
    main()
