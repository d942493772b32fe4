"""`depthport predict FILE IMAGE`: run an exported file on one image and write a colourised depth PNG."""

from __future__ import annotations

from pathlib import Path

from .common import accelerator_options, add_accelerator_args, add_threads, console


def add_parser(subparsers):
    p = subparsers.add_parser("predict", help="run an exported file on an image and write a colourised depth PNG")
    p.add_argument("file", help="exported model (.tflite, .pte, .onnx)")
    p.add_argument("image")
    p.add_argument("-o", "--output", default="depth.png")
    p.add_argument("--npy", help="also write the depth as .npy (float32; metres for metric models)")
    p.add_argument("--model-size", action="store_true",
                   help="keep the depth at the model's input size (default: resized to the image's size, bicubic "
                        "as transformers' post_process_depth_estimation)")
    p.add_argument("--focal", type=float, metavar="PX",
                   help="the camera's focal length in pixels of IMAGE: required by models whose metres need it "
                        "(da3-metric-large: metres = value x focal_px / 300 at the input size)")
    p.add_argument("--letterbox", action="store_true", help="pad to the model's aspect instead of stretching")
    add_threads(p)
    add_accelerator_args(p)
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def run(args) -> int:
    from ..predict import export_report, output_units, predict
    from ..quiet import native_stderr_muted

    accel = accelerator_options(args)
    with native_stderr_muted(not args.verbose):
        depth = predict(args.file, args.image, args.output, args.npy, letterbox=args.letterbox, threads=args.threads,
                        focal=args.focal, model_size=args.model_size, **accel)
    unit = " m" if (output_units(Path(args.file)) or {}).get("metric") else ""
    console().print(f"wrote {args.output}" + (f" and {args.npy}" if args.npy else "")
                    + f": depth {depth.shape[0]}x{depth.shape[1]}, range {depth.min():.4g}..{depth.max():.4g}{unit}")
    if export_report(Path(args.file)).get("random_weights"):
        console(stderr=True).print("[bold red]RANDOM WEIGHTS: this file was exported from random weights; "
                                   "its depth means nothing[/]")
    return 0
