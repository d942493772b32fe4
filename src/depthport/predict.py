"""`depthport predict`: run any exported file on one image with the right preprocessing."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
from PIL import Image

from .outdir import check_output_file
from .atomic import atomic_path
from .preprocess import InputError, load_image, to_tensor
from .registry import MODELS
from .runtimes import load_runner
from .visualize import colorize


def export_report(model_path: Path) -> dict:
    """The report.json of the file's export folder, or {} when there is none (or it is unreadable)."""
    report = model_path.parent / "report.json"
    try:
        data = json.loads(report.read_text()) if report.exists() else {}
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def model_input(image: Image.Image, model_path: Path, hw: tuple[int, int], letterbox: bool = False) -> np.ndarray:
    """The file's input for ``image``, as its export's report describes it: un-normalised when the ImageNet
    normalisation was folded into the model; resized as the family of the report's model prepares images (e.g.
    Depth Anything 3's own area/cubic resize), or letterboxed on request. Without a report naming a known model,
    a bicubic stretch."""
    report = export_report(model_path)
    normalize = "folded" not in str(report.get("normalization", ""))
    spec = MODELS.get(str(report.get("model", "")))
    if letterbox or spec is None:
        return to_tensor(image, hw, normalize=normalize, letterbox=letterbox)
    return spec.preprocess(image, hw, normalize)


def predict(model_path: str | Path, image_path: str | Path, out_png: str | Path, out_npy: str | Path | None = None,
            letterbox: bool = False, threads: int = 2, accelerator: str = "cpu",
            gpu_precision: str = "fp32") -> np.ndarray:
    """Depth (H, W) at the model's input size; writes a colourised PNG at the image's own size.

    ``accelerator="gpu"`` runs a .tflite on the LiteRT GPU accelerator with ``gpu_precision`` compute (FP32
    unless "fp16" is asked for). The output paths are checked before anything runs (an existing folder, or a file
    where a folder should be, is an InputError); the PNG and the .npy are written together or not at all."""
    model_path = Path(model_path)
    taken = {model_path.resolve(): "the model file", Path(image_path).resolve(): "the image"}
    for option, out in (("-o", out_png), ("--npy", out_npy)):
        if out:
            key = check_output_file(out, option).resolve()
            if key in taken:
                raise InputError(f"{option} {out} would overwrite {taken[key]}; give another file name")
            taken[key] = f"the {option} file"
    image = load_image(image_path)
    runner = load_runner(model_path, threads=threads, accelerator=accelerator, gpu_precision=gpu_precision)
    if len(runner.input_shape) != 4 or runner.input_shape[1] != 3:
        raise InputError(f"{model_path.name} does not take an image (input {list(runner.input_shape)})")
    hw = tuple(runner.input_shape[2:])
    x = model_input(image, model_path, hw, letterbox)
    depth = np.asarray(runner.run(x)).reshape(hw)
    picture = colorize(depth).resize(image.size, Image.Resampling.BILINEAR)
    with contextlib.ExitStack() as both:  # both files or neither: each is renamed into place only if all went well
        png_tmp = both.enter_context(atomic_path(out_png))
        npy_tmp = both.enter_context(atomic_path(out_npy)) if out_npy else None
        picture.save(png_tmp, format="PNG")
        if npy_tmp:
            with open(npy_tmp, "wb") as fh:
                np.save(fh, depth.astype(np.float32))
    return depth
