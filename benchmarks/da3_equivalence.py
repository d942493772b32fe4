"""Depth Anything 3 Small (real config): depthport vs the official `depth-anything-3` package, same weights.

Prints, at the export shape (default 896x504, portrait): our eager model in reference form and in export form
(all default rewrites) vs the official DepthAnything3Net, and, with --tflite, an exported LiteRT file run on
the CPU vs the official model (relative L2, Pearson, max abs). Inputs: natural images (portrait crops,
Depth Anything 3's own resize) and one N(0, 1) tensor.

--letterbox reproduces the letterbox-vs-native comparison: the export-form model built square (long side x
long side) on the image letterboxed with black bars, its output cropped to the content box and resized back,
vs the official model at the native shape.

    python benchmarks/da3_equivalence.py [--size 896x504] [--weights random] [--tflite FILE] [--letterbox]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from PIL import Image

from depthport.build import build, resolve_weights
from depthport.preprocess import da3_resize, letterbox_box, parse_size, to_tensor
from depthport.quiet import native_stderr_muted
from depthport.reference import reference_model
from depthport.registry import get_spec
from depthport.core.metrics import max_abs, pearson, rel_l2


def portrait_images(hw: tuple[int, int], n: int) -> list[tuple[str, Image.Image]]:
    """Natural images centre-cropped to the aspect of ``hw`` and resized the way Depth Anything 3 does."""
    import skimage.data as data

    out = []
    for name in ["astronaut", "coffee", "chelsea", "rocket"][:n]:
        img = Image.fromarray(getattr(data, name)()).convert("RGB")
        w = min(img.width, round(img.height * hw[1] / hw[0]))
        h = min(img.height, round(w * hw[0] / hw[1]))
        left, top = (img.width - w) // 2, (img.height - h) // 2
        img = da3_resize(img.crop((left, top, left + w, top + h)), max(hw))
        out.append((name, img if img.size == (hw[1], hw[0]) else img.resize((hw[1], hw[0]), Image.Resampling.BICUBIC)))
    return out


def inputs(hw: tuple[int, int], n_images: int) -> list[tuple[str, np.ndarray]]:
    xs = [(name, to_tensor(img, hw)) for name, img in portrait_images(hw, n_images)]
    noise = np.random.default_rng(0).standard_normal((1, 3, *hw)).astype(np.float32)
    return xs + [("N(0,1) noise", noise)]


@torch.no_grad()
def run(model, x: np.ndarray) -> np.ndarray:
    out = model(torch.from_numpy(x))
    return (out[0] if isinstance(out, tuple) else out).numpy()


def row(label: str, a, b) -> str:
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    r = pearson(a, b)
    return (f"  {label:34s} rel L2 {rel_l2(a, b):.3e}  Pearson {r:.10f} (1 - r = {1 - r:.1e})  "
            f"max abs {max_abs(a, b):.3e}")


def equivalence(spec, weights, hw, n_images: int, tflite: str | None) -> None:
    official = reference_model(spec, weights)
    forms = {"reference form": build(spec, hw, weights, rewrites=[]).model,
             "export form": build(spec, hw, weights).model}
    runner = None
    if tflite:
        from depthport.runtimes import load_runner

        with native_stderr_muted():
            runner = load_runner(tflite, threads=2)
        if tuple(runner.input_shape[2:]) != tuple(hw):
            raise SystemExit(f"{tflite} takes {list(runner.input_shape)}, not {hw[0]}x{hw[1]}")
    print(f"\n== {spec.id} {hw[0]}x{hw[1]}, weights {weights.source}: vs official depth-anything-3 DepthAnything3Net")
    for name, x in inputs(hw, n_images):
        t = time.perf_counter()
        ref = run(official, x)
        t_ref = time.perf_counter() - t
        print(f" {name} (official eager {t_ref:.1f} s; depth mean {ref.mean():.3f}, std {ref.std():.3f})")
        for label, model in forms.items():
            print(row(f"depthport eager, {label}", run(model, x), ref))
        if runner is not None:
            with native_stderr_muted():
                lite = np.asarray(runner.run(x))
            print(row("LiteRT FP32 file, CPU (XNNPACK)", lite, ref))


def letterbox(spec, weights, hw, n_images: int) -> None:
    """Pearson of the letterboxed square export (eager) vs the official model at the native shape."""
    square = (max(hw), max(hw))
    official = reference_model(spec, weights)
    native = build(spec, hw, weights).model
    boxed = build(spec, square, weights).model
    top, left, h, w = letterbox_box(hw, square)
    print(f"\n== {spec.id} letterbox {square[0]}x{square[1]} (content {h}x{w} at top {top}, left {left}) vs native "
          f"{hw[0]}x{hw[1]}, weights {weights.source}; Pearson vs the official model at native aspect")
    for name, img in portrait_images(hw, n_images):
        ref = run(official, to_tensor(img, hw))[0, 0]
        out = run(boxed, to_tensor(img, square, letterbox=True))[0, 0][top:top + h, left:left + w]
        if out.shape != ref.shape:
            out = np.asarray(Image.fromarray(out).resize((hw[1], hw[0]), Image.Resampling.BILINEAR))
        print(f"  {name:12s} native export form {pearson(run(native, to_tensor(img, hw)), ref):.6f}  |  "
              f"letterboxed {pearson(out, ref):.6f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="da3-small")
    ap.add_argument("--size", default="896x504", help="export shape HxW")
    ap.add_argument("--weights", default="random", help="random | checkpoint file | hub repo id")
    ap.add_argument("--images", type=int, default=2, help="natural images (plus one noise input)")
    ap.add_argument("--tflite", help="also compare this LiteRT file (built at --size) on the CPU")
    ap.add_argument("--letterbox", action="store_true", help="letterbox-vs-native comparison instead")
    args = ap.parse_args()
    torch.set_num_threads(2)
    spec, hw = get_spec(args.model), parse_size(args.size)
    weights = resolve_weights(spec, args.weights)
    if weights.random:
        print("RANDOM weights (seeded, calibrated): figures test the implementation, not depth quality")
    if args.letterbox:
        letterbox(spec, weights, hw, args.images)
    else:
        equivalence(spec, weights, hw, args.images, args.tflite)


if __name__ == "__main__":
    main()
