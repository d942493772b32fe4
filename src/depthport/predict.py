"""`depthport predict`: run any exported file on one image with the right preprocessing, the depth resized back
to the image's size; metric models' depth in metres (with the camera's focal length where the model needs it).
``Predictor`` loads a file once for many images (``predict_many``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

from .atomic import atomic_paths
from .core.formatting import listed
from .core.report_model import Units, load
from .core.schema import ReportJson
from .errors import NotPerInput
from .focal import LONGEST_35MM, SHORTEST_35MM, Focal, focal_px, given_note
from .outdir import claim_output_files, resolved
from .preprocess import (FOCAL_KEY, FRAMES_KEY, TURNED_KEY, Frames, InputError, letterbox_box, load_image,
                         stretch, stretch_note, to_tensor)
from .registry import MODELS
from .runtimes import load_runner
from .visualize import colorize, depth_range, with_colorbar

# What each output file of one image holds
OUTPUT_KIND = {".png": "colourised depth image", ".npy": "float32 NumPy array"}


def export_report(model_path: Path) -> ReportJson:
    """The report.json of the file's export folder; empty when there is none (or it is unreadable)."""
    report = model_path.parent / "report.json"
    try:
        data = json.loads(report.read_text()) if report.exists() else {}
    except (OSError, json.JSONDecodeError):
        return ReportJson({})
    return ReportJson(data if isinstance(data, dict) else {})


def model_input(image: Image.Image, model_path: Path, hw: tuple[int, int], letterbox: bool = False) -> np.ndarray:
    """The file's input for ``image``, as its export's report describes it: un-normalised when the ImageNet
    normalisation was folded into the model; resized as the family of the report's model prepares images (e.g.
    Depth Anything 3's own area/cubic resize), or letterboxed on request. Without a report naming a known model,
    a bicubic stretch."""
    report = export_report(model_path)
    normalize = "folded" not in str(report.normalization or "")
    spec = MODELS.get(str(report.model or ""))
    if letterbox or spec is None:
        return to_tensor(image, hw, normalize=normalize, letterbox=letterbox)
    return spec.preprocess(image, hw, normalize)


def output_units(model_path: Path) -> Units | None:
    """The file's output units, as its export's report states them (or, for an older report, its model id's);
    None when no report says which model the file is."""
    report = export_report(model_path)
    if isinstance(report.output_units, dict):
        return load(Units, report.output_units)
    spec = MODELS.get(str(report.model or ""))
    return load(Units, spec.units()) if spec is not None else None


def check_focal(units: Units | None, focal: Focal | None, model_path: Path, image_path,
                from_exif: bool = False) -> None:
    """``--focal`` is required where metres need it, unless ``from_exif`` (photos may give it: ``Predictor.depth``
    then asks each photo), and refused where they do not (one-line InputErrors)."""
    needs = bool(units and units.focal_reference_px)
    if focal is None and needs and not from_exif:
        raise _focal_required(model_path, units.focal_reference_px, "",
                              f"the focal length in pixels of {Path(image_path).name}")
    if focal is not None and not needs:
        what = "no report.json beside it says what its output is" if units is None else (
            f"its output is {units.meaning}")
        raise InputError(f"--focal applies only to models whose metres need the focal length; "
                         f"{model_path.name}: {what}")
    if focal is not None and not (math.isfinite(focal.value) and focal.value > 0):
        raise InputError(f"--focal must be a positive number of pixels (or of millimetres in 35 mm terms: 26mm), "
                         f"got {focal}")


def photo_focal(units: Units | None, image: Image.Image, model_path: Path) -> float | None:
    """The focal length in pixels of ``image`` from its EXIF (``load_image`` keeps it), for a model whose metres
    need it; None for other models. A photo without it is an InputError saying to pass --focal."""
    ref = units.focal_reference_px if units else None
    if not ref:
        return None
    if not (f35 := image.info.get(FOCAL_KEY)):
        raise _focal_required(model_path, ref, ", and this photo's EXIF has no 35 mm-equivalent focal length "
                              "(FocalLengthIn35mmFilm)", "its focal length in pixels")
    if not SHORTEST_35MM <= f35 <= LONGEST_35MM:  # a broken EXIF: its metres would be off by as much
        raise _focal_required(model_path, ref, f", and this photo's EXIF says {f35:g} mm in 35 mm terms "
                              "(FocalLengthIn35mmFilm), which no camera's lens is", "its focal length in pixels")
    return focal_px(f35, image.size)


def _focal_required(model_path: Path, ref: float, why: str, what: str) -> InputError:
    return InputError(f"{model_path.name} gives metres only with the camera's focal length{why}: pass --focal PX, "
                      f"{what}, or --focal MMmm in 35 mm terms, as a phone's specifications give it (26mm) "
                      f"(metres = value x focal_px / {ref:g} at the model's input size)")


def to_metres(depth: np.ndarray, units: Units | None, focal: float | None, image_size: tuple[int, int],
              letterbox: bool) -> np.ndarray:
    """The model's output in metres (unchanged for an output that is metres already or has no unit). ``focal`` is in
    pixels of the image (``image_size`` = (W, H)); at the input size it scales with the resize (the mean of the two
    axes' scales for a stretch, the one scale of a letterbox)."""
    ref = units.focal_reference_px if units else None
    if not ref:
        return depth
    h, w = depth.shape
    sx, sy = w / image_size[0], h / image_size[1]
    scale = min(sx, sy) if letterbox else (sx + sy) / 2
    return depth * np.float32(focal * scale / ref)


def photo_size(depth: np.ndarray, image_hw: tuple[int, int], letterbox: bool = False,
               out_hw: tuple[int, ...] | None = None) -> np.ndarray:
    """``depth`` at the model's input size -> (H, W) of the image (or ``out_hw``: a video's first frame's, for a
    frame of another size), as transformers' Depth Anything ``post_process_depth_estimation`` resizes it:
    ``torch.nn.functional.interpolate(mode="bicubic", align_corners=False)``. A letterboxed input's content box, the
    image's, is cropped first. Values are not rescaled (bicubic may overshoot the input's range slightly near
    edges)."""
    if letterbox:
        top, left, h, w = letterbox_box(image_hw, depth.shape)
        depth = depth[top:top + h, left:left + w]
    image_hw = out_hw or image_hw
    import torch  # here: importing predict stays light (tests/registry/test_registry.py)

    x = torch.from_numpy(np.ascontiguousarray(depth, dtype=np.float32))[None, None]
    return torch.nn.functional.interpolate(x, size=tuple(image_hw), mode="bicubic", align_corners=False)[0, 0].numpy()


class NotADepthMap(NotPerInput):
    """The file's output is not one map: the file is no depth model (a classifier's logits, several channels)."""


def depth_map(out: np.ndarray, name: str) -> np.ndarray:
    """The file's output as one (h, w) map: (1, 1, h, w), (1, h, w), (1, h, w, 1) or (h, w), at the input's size or
    another (a model that predicts at half resolution: ``photo_size`` resizes it like any other); anything else is a
    ``NotADepthMap``."""
    out = np.asarray(out)
    squeezed = np.squeeze(out)
    if squeezed.ndim != 2:
        raise NotADepthMap(f"{name} gives no depth map: its output is {list(out.shape)}, where a depth model gives "
                           "one map, (1, H, W) or (1, 1, H, W)")
    return squeezed


def image_layout(shape: tuple[int, ...], name: str) -> tuple[tuple[int, int], bool]:
    """((H, W), channels last) of a file's image input: NCHW (1, 3, H, W), as depthport exports, or NHWC
    (1, H, W, 3), as TensorFlow-made files such as MiDaS's .tflite take it; anything else is an InputError."""
    if len(shape) == 4 and shape[1] == 3:
        return (int(shape[2]), int(shape[3])), False
    if len(shape) == 4 and shape[3] == 3:
        return (int(shape[1]), int(shape[2])), True
    raise InputError(f"{name} does not take an image (input {list(shape)}: an image is (1, 3, H, W) or (1, H, W, 3))")


class Predictor:
    """An exported file loaded once, for any number of images (see ``predict`` for the options)."""

    def __init__(self, model_path: str | Path, letterbox: bool = False, threads: int = 2, accelerator: str = "cpu",
                 gpu_precision: str = "fp32", focal: float | Focal | None = None, model_size: bool = False,
                 images: str | Path = "the image", prompt: str | Path | None = None, prompts_beside: bool = False,
                 prompt_frames: str | Path | None = None, exif_focal: bool = True):
        self.model_path = Path(model_path)
        self.units = output_units(self.model_path)
        focal = Focal(focal) if isinstance(focal, (int, float)) else focal
        check_focal(self.units, focal, self.model_path, images, from_exif=exif_focal)
        self.letterbox, self.focal, self.model_size = letterbox, focal, model_size
        self.exif_focals: list[float] = []  # the 35 mm-equivalent focal lengths (mm) read from photos, in order
        self.given_px: set[float] = set()  # the pixels a --focal in millimetres gave the pictures (``given_note``)
        self.runner = load_runner(self.model_path, threads=threads, accelerator=accelerator,
                                  gpu_precision=gpu_precision)
        self.hw, self.channels_last = image_layout(tuple(self.runner.input_shape), self.model_path.name)
        self.exported = bool(export_report(self.model_path).model)  # depthport's export, its report beside it
        wants = tuple(getattr(self.runner, "extra_shapes", ()))
        self.prompt_hw = tuple(wants[0][2:]) if wants else None
        if (prompt is not None or prompt_frames is not None) and not wants:
            raise InputError(f"--prompt is for files with a prompt depth input; {self.model_path.name} takes one image")
        if letterbox and wants:
            raise InputError(f"--letterbox pads the image to {self.model_path.name}'s shape, and its prompt depth "
                             "would no longer line up with it: a prompted file takes the image stretched to its "
                             "shape, as the prompt is; to keep the image's aspect, export a file at it")
        self.prompts_beside = bool(wants) and prompt is None and prompts_beside
        self.prompt_frames = self._frames(prompt_frames) if prompt_frames is not None else None
        self.extra = () if self.prompts_beside or self.prompt_frames is not None else self._prompt(prompt)

    def _prompt(self, prompt: str | Path | None) -> tuple:
        """The file's further input: the prompt depth (``--prompt``) of a prompted model, checked; else none."""
        from .core.prompts import load_prompt

        if self.prompt_hw and prompt is None:
            h, w = self.prompt_hw
            raise InputError(f"{self.model_path.name} takes a prompt depth map beside the image ({h}x{w}): pass "
                             "--prompt DEPTH, a 16-bit PNG in millimetres or an .npy in metres (for a folder or a "
                             "pattern: NAME.prompt.png or NAME.prompt.npy beside each NAME.jpg; for a video: an .npy "
                             "stack of (frames, h, w) metres)")
        return (self._prompt_input(load_prompt(prompt), Path(prompt).name),) if prompt is not None else ()

    def _prompt_input(self, depth: np.ndarray, name: str) -> np.ndarray:
        """The (1, 1, h, w) input of a prompt: of the file's prompt shape, or of any shape for a dynamic file."""
        from .core.prompts import prompt_input

        return prompt_input(depth, depth.shape if getattr(self.runner, "dynamic", False) else self.prompt_hw, name)

    def _frames(self, path: str | Path) -> np.ndarray:
        """A video's prompts: an .npy stack (frames, h, w) in metres, one per decoded frame, read as frames need it."""
        from .core.prompts import HEIGHT_FIRST, not_npy

        name = Path(path).name
        try:
            stack = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            reason = (not_npy(Path(path)) if Path(path).is_file() else None) or exc
            raise InputError(f"cannot read the prompt stack {path}: {reason} (a video takes an .npy of (frames, h, "
                             "w) metres)") from None
        if stack.ndim != 3 or stack.dtype.kind not in "fiu":
            raise InputError(f"the prompt stack {name} holds {stack.dtype} of shape {list(stack.shape)}: a video takes "
                             "an .npy of (frames, h, w) depths in metres, one per frame")
        if not getattr(self.runner, "dynamic", False) and tuple(stack.shape[1:]) != tuple(self.prompt_hw):
            (h, w), (ph, pw) = stack.shape[1:], self.prompt_hw
            raise InputError(f"the prompt stack {name} holds {h}x{w} prompts but the model takes {ph}x{pw} ones "
                             f"({HEIGHT_FIRST})")
        return stack

    def prompt_frame(self, index: int) -> tuple:
        """The further input for frame ``index`` of a video: that frame of the prompt stack, checked."""
        from .core.prompts import check_prompt

        if index >= len(self.prompt_frames):
            raise InputError(f"the prompt stack has {len(self.prompt_frames)} frames: none for frame {index}")
        depth = check_prompt(np.asarray(self.prompt_frames[index], np.float64), f"frame {index}")
        return (self._prompt_input(depth, f"frame {index} of the prompt stack"),)

    def prompt_beside(self, image: Path) -> tuple:
        """The further input for ``image`` of a folder: its ``NAME.prompt.npy`` / ``NAME.prompt.png``, checked."""
        from .core.prompts import load_prompt, prompt_beside

        path = prompt_beside(image)
        return (self._prompt_input(load_prompt(path), path.name),)

    @property
    def metric(self) -> bool:
        return bool(self.units and self.units.metric)

    def depth(self, image: Image.Image, extra: tuple | None = None, hw: tuple[int, ...] | None = None) -> np.ndarray:
        """Depth (H, W) of an RGB image: at the image's size (or ``hw``), or the model's with ``model_size``; metres
        for a metric model. ``extra``: this image's prompt (``prompt_beside``), else the one given at load."""
        if self.focal is not None:  # pixels of the first frame where a video's frames change size (``hw``)
            focal = self.focal.px(image.size, (hw[1], hw[0]) if hw else None)
            if self.focal.mm:
                self.given_px.add(focal)
        elif (focal := photo_focal(self.units, image, self.model_path)) is not None:
            self.exif_focals.append(image.info[FOCAL_KEY])
        x = model_input(image, self.model_path, self.hw, self.letterbox)
        if self.channels_last:
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        raw = depth_map(self.runner.run(x, *(self.extra if extra is None else extra)), self.model_path.name)
        depth = to_metres(raw, self.units, focal, image.size, self.letterbox)
        return depth if self.model_size else photo_size(depth, (image.height, image.width), self.letterbox, hw)

    def stretched(self, size_wh: tuple[int, int]) -> float:
        """How far the file's input stretches a (W, H) picture's aspect (1 with ``letterbox``, which keeps it)."""
        return 1.0 if self.letterbox else stretch(size_wh, self.hw)

    def picture(self, depth: np.ndarray, span: tuple[float, float] | None = None) -> Image.Image:
        """The colourised depth at its own size, with a colour-bar legend in metres inside it for a metric model;
        its colours span ``span`` (lo, hi), by default the depth's own 2nd to 98th percentile."""
        lo, hi = span or depth_range(depth)
        picture = colorize(depth, lo=lo, hi=hi)
        return with_colorbar(picture, lo, hi, "depth (m)") if self.metric else picture


def turned_prompts_note(names: list[str] | None = None, video: bool = False) -> str:
    """A prompted file's photo (or the photos ``names`` of a folder, or a ``video``'s frames) turned upright by its
    EXIF orientation (a video's display rotation), its prompt used as stored: a prompt in the camera's orientation
    (ARKit's depth is; an iPhone stores a portrait photo or video turned, and says so) no longer lines up. Which is
    right depends on the app that saved them: said, not guessed."""
    if video:
        return ("the frames turned upright by the video's display rotation, the prompt stack used as stored: a prompt "
                "in the camera's orientation (ARKit's depth is) must be turned with its frame")
    why = "a prompt in the camera's orientation (ARKit's depth is) must be turned with its photo"
    if not names:
        return f"the photo turned upright by its EXIF orientation, its prompt used as stored: {why}"
    whose, prompts = ("their", "their prompts") if len(names) > 1 else ("its", "its prompt")
    return f"{listed('photo', names)} turned upright by {whose} EXIF orientation, {prompts} used as stored: {why}"


def write_depth(depth: np.ndarray, picture: Image.Image, out_png: str | Path, out_npy: str | Path | None) -> None:
    """The PNG (and the .npy, float32) written together or not at all: each is renamed into place only once both
    are written. The .npy's data goes through Python's own write, whose error on a full disk says so (ENOSPC):
    ``np.save`` writes with the C library's, whose OSError has no errno ('120000 requested and 59360 written')."""
    with atomic_paths(*[out for out in (out_png, out_npy) if out]) as temps:
        picture.save(temps[0], format="PNG")
        if out_npy:
            values = np.ascontiguousarray(depth, dtype="<f4")
            with open(temps[1], "wb") as fh:
                np.lib.format.write_array_header_1_0(fh, np.lib.format.header_data_from_array_1_0(values))
                fh.write(memoryview(values).cast("B"))


def predict(model_path: str | Path, image_path: str | Path, out_png: str | Path, out_npy: str | Path | None = None,
            letterbox: bool = False, threads: int = 2, accelerator: str = "cpu",
            gpu_precision: str = "fp32", focal: float | Focal | None = None, model_size: bool = False,
            prompt: str | Path | None = None, on_focal: Callable[[float, tuple[int, int]], None] | None = None,
            on_frames: Callable[[Frames], None] | None = None, on_note: Callable[[str], None] | None = None
            ) -> np.ndarray:
    """Depth (H, W) of one image at the image's displayed size (``photo_size``: bicubic, as transformers
    resizes it), or at the model's input size with ``model_size``; in metres for a metric model. Writes the
    colourised depth as a PNG of the same size (with a colour-bar legend in metres inside it for a metric model) and, with
    ``out_npy``, the depth as float32 .npy.

    ``focal`` is the camera's focal length in pixels of the image (or a ``focal.Focal``: 26 mm in 35 mm terms),
    which models whose metres need it (Depth Anything 3 Metric) take from the photo's EXIF when it is None
    (``focal.focal_35mm``; an InputError where it has none; ``on_focal(f35_mm, (W, H))`` is told what was used), and
    others refuse. ``on_frames(frames)`` is told when the
    image is an animation or a multi-page TIFF (its first frame or page is used), ``on_note(note)`` when the input
    stretches the image's aspect more than ``preprocess.STRETCH_NOTED``, and when a prompted file's photo was turned
    upright by its EXIF orientation (``turned_prompts_note``). ``prompt`` is the prompt depth file
    (16-bit PNG in millimetres, or .npy in metres) that prompted files (Prompt Depth Anything) require and others
    refuse. ``accelerator="gpu"`` runs a .tflite on the LiteRT GPU accelerator with ``gpu_precision`` compute (FP32
    unless "fp16" is asked for). The output paths are checked
    before anything runs (an existing folder, or a file where a folder should be, is an InputError); the PNG and
    the .npy are written together or not at all."""
    model_path = Path(model_path)
    claim_output_files([(option, out, suffix, f"the depth is written as {suffix} (a {OUTPUT_KIND[suffix]})")
                        for option, out, suffix in (("-o", out_png, ".png"), ("--npy", out_npy, ".npy"))],
                       {resolved(model_path): "the model file", resolved(image_path): "the image",
                        **({resolved(prompt): "the --prompt file"} if prompt else {})})
    image = load_image(image_path)
    if on_frames and image.info.get(FRAMES_KEY):
        on_frames(image.info[FRAMES_KEY])
    if focal is None and photo_focal(output_units(model_path), image, model_path) and on_focal:
        on_focal(image.info[FOCAL_KEY], image.size)  # before the model loads: one without it fails at once
    predictor = Predictor(model_path, letterbox, threads, accelerator, gpu_precision, focal, model_size, image_path,
                          prompt)
    stretched = not letterbox and stretch_note(image.size, predictor.hw, "the photo", exported=predictor.exported,
                                               prompt_hw=predictor.prompt_hw)
    notes = [stretched] if stretched else []
    if predictor.prompt_hw and image.info.get(TURNED_KEY):
        notes.append(turned_prompts_note())
    for note in notes if on_note else []:
        on_note(note)
    depth = predictor.depth(image)
    if on_note and (given := given_note(predictor.focal, predictor.given_px)):
        on_note(given)
    write_depth(depth, predictor.picture(depth), out_png, out_npy)
    return depth
