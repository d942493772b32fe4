"""`depthport predict FILE INPUT`: run an exported file on an image, a folder or pattern of images, a video, or a
folder or pattern of videos, and write colourised depth (PNGs, or depth videos) at the input's size."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from ..errors import InputError, disk_full
from .common import (accelerator_options, add_accelerator_args, add_threads, console, model_file_missing,
                     status_console)
from .progress import item_progress

DEFAULT_OUTPUT = {"image": "depth.png", "images": "depth", "video": "depth.mp4", "videos": "depth"}


def add_parser(subparsers):
    p = subparsers.add_parser("predict", help="run an exported file on images or a video and write colourised depth")
    p.add_argument("file", metavar="FILE", help="exported model (.tflite, .pte, .onnx)")
    p.add_argument("image", metavar="INPUT", nargs="+",
                   help="an image, a folder of images, a quoted glob pattern ('photos/*.jpg', '**' recursive), a "
                        "video (.mp4, .mov, .mkv, .webm, .avi, .MTS, .3gp, ...), or a folder or pattern of videos; "
                        "several files (the shell's unquoted photos/*.jpg) are taken as a pattern's matches")
    p.add_argument("-o", "--output",
                   help="one image: the depth PNG (default depth.png), or a folder to put NAME.png in; a folder or "
                        "pattern: the output folder, one NAME.png per image (default depth/); a video: the depth "
                        "video, .mp4/.mov/.mkv (default depth.mp4), or a folder to put NAME.mp4 in; a folder or "
                        "pattern of videos: the output folder, one NAME.mp4 per video (default depth/)")
    p.add_argument("--npy", nargs="?", const="", metavar="PATH",
                   help="also write the depth as float32 .npy (metres for metric models); alone: beside the PNGs. "
                        "One image: PATH is the file, or a folder to put NAME.npy in; a folder or pattern: PATH is a "
                        "folder; a video: the stack (frames, H, W) is always written, beside the video unless PATH "
                        "names it (or a folder for NAME.npy)")
    p.add_argument("--model-size", action="store_true",
                   help="keep the depth at the model's input size (default: resized to the input's size, bicubic "
                        "as transformers' post_process_depth_estimation)")
    p.add_argument("--focal", type=_focal, metavar="PX|MMmm",
                   help="the camera's focal length in pixels of the input (1450), or in millimetres in 35 mm terms "
                        "(26mm: a phone's main camera), for models whose metres need it (da3-metric-large: metres = "
                        "value x focal_px / 300 at the input size); default: each photo's own, from its EXIF 35 "
                        "mm-equivalent focal length (a video needs --focal)")
    p.add_argument("--letterbox", action="store_true", help="pad to the model's aspect instead of stretching")
    p.add_argument("--prompt", metavar="DEPTH",
                   help="prompted models (prompt-da-*): the coarse metric depth of the photo, a 16-bit PNG in "
                        "millimetres or an .npy in metres, at the file's prompt shape (e.g. ARKit's 192x256); for a "
                        "folder or a pattern, NAME.prompt.png / NAME.prompt.npy beside each image instead; for a "
                        "video, an .npy stack (frames, h, w) in metres, one per frame")
    add_threads(p)
    add_accelerator_args(p)
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _focal(text: str):
    """``--focal``: a ``focal.Focal`` (an argparse ``type=``)."""
    import argparse

    from ..focal import Focal

    try:
        return Focal.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args) -> int:
    from ..predict import export_report
    from ..predict_inputs import open_files, open_inputs, outside
    from ..runtimes.base import SUFFIXES

    models = [source for source in args.image if Path(source).suffix in SUFFIXES]
    if models and Path(args.file).suffix not in SUFFIXES:
        raise InputError(f"{models[0]} is the model file and {args.file} is not: the model comes first, "
                         f"depthport predict {models[0]} {args.file}" + (" ..." if len(args.image) > 1 else ""))
    _no_pipes(args)
    if not Path(args.file).exists():
        raise model_file_missing(args.file)
    options = dict(letterbox=args.letterbox, threads=args.threads, focal=args.focal, model_size=args.model_size,
                   **accelerator_options(args))
    inputs = open_inputs(args.image[0]) if len(args.image) == 1 else open_files(args.image)
    if args.prompt and inputs.kind == "images":
        raise InputError("--prompt goes with one image (its prompt depth map) or a video (an .npy stack of one per "
                         "frame); for a folder or a pattern, put NAME.prompt.png or NAME.prompt.npy beside each NAME.jpg")
    if args.prompt and inputs.kind == "videos":
        raise InputError("--prompt goes with one image (its prompt depth map) or one video (an .npy stack of one per "
                         "frame); give each video on its own with its stack")
    out = Path(args.output or DEFAULT_OUTPUT[inputs.kind])
    if inputs.kind in ("images", "videos"):
        inputs = outside(inputs, out, Path(args.npy) if args.npy else None)
    if inputs.kind == "image":
        code = _one(args, inputs.files[0], out, options)
    else:
        code = (_videos if inputs.kind == "videos" else _many)(args, inputs, out, options)
    report = export_report(Path(args.file))
    if not report.model:
        console(stderr=True).print(
            f"no depthport report.json beside {args.file}: its input was assumed to be ImageNet-normalised RGB "
            "stretched to the file's shape, and its output unitless; keep the export's report.json beside the file",
            style="yellow", markup=False, highlight=False, soft_wrap=True)
    if report.random_weights:
        console(stderr=True).print("[bold red]RANDOM WEIGHTS: this file was exported from random weights; "
                                   "its depth means nothing[/]")
    return code


def _no_pipes(args) -> None:
    """'-' refused as what it is: depthport reads and writes files, not standard input and output (it was taken as
    a file named '-')."""
    if "-" in args.image:
        raise InputError("'-' (standard input) is not read: give the path of the image, folder or video (save "
                         "what you would pipe to a file first)")
    for option, value in (("-o", args.output), ("--npy", args.npy)):
        if value == "-":
            raise InputError(f"{option} -: depthport writes files, not standard output: give {option} a file name "
                             "or a folder")


def into_folder(given: str | None, image: Path, suffix: str) -> Path | None:
    """One image's or a video's output where -o or --npy names a folder (one that exists, or a path ending in '/'):
    the input's name in it, as ``cp`` puts a file into a folder (``photos/IMG_1.jpg -o depth/`` gives
    ``depth/IMG_1.png``, ``IMG_2.MOV -o depth/`` ``depth/IMG_2.mp4``); else None."""
    if given and (given.endswith(("/", os.sep)) or Path(given).is_dir()):
        return Path(given) / f"{image.stem}{suffix}"
    return None


@contextlib.contextmanager
def _or_folder(source: Path):
    """An output named neither with its file's suffix nor as a folder (``outdir.WrongSuffix``) is told both ways
    ('give -o NAME.png, or a folder to put IMG_0001.png in (depth/)'): -o and --npy take a folder (``into_folder``)."""
    from ..outdir import WrongSuffix

    try:
        yield
    except WrongSuffix as exc:
        raise InputError(f"{exc}, or a folder to put {source.stem}{exc.suffix} in ({exc.path.with_suffix('')}/)"
                         ) from None


def _one(args, image: Path, out: Path, options: dict) -> int:
    from ..focal import photo_note
    from ..predict import output_units, predict
    from ..predict_inputs import first_of
    from ..quiet import native_stderr_muted
    from ..visualize import not_finite

    out = into_folder(args.output, image, ".png") or out
    npy = out.with_suffix(".npy") if args.npy == "" else into_folder(args.npy, image, ".npy") or args.npy
    notes = []  # an animation's or a multi-page TIFF's count; the focal length the metres took from the EXIF, if so
    with native_stderr_muted(not args.verbose), _or_folder(image):
        try:
            depth = predict(args.file, image, out, npy, prompt=args.prompt,
                            on_focal=lambda f35, size: notes.append(f"; {photo_note(f35, size)}"),
                            on_frames=lambda many: notes.append(f"; {first_of(many)}"),
                            on_note=lambda note: notes.append(f"; {note}"), **options)
        except (InputError, KeyboardInterrupt, OSError) as exc:
            raise _let_go(exc) from None
    units = output_units(Path(args.file))
    unit = " m" if units and units.metric else ""
    bad = not_finite(depth)
    finite = depth[np.isfinite(depth)] if bad else depth  # a copy only where some values are not finite
    span = f"range {finite.min():.4g}..{finite.max():.4g}{unit}" if finite.size else "no finite value"
    if bad:
        notes.append(f"; {bad} of its {depth.size} values are NaN or infinite (the model's arithmetic overflowed?)")
    notes.append(_ran_on(args))
    width, height = depth.shape[1], depth.shape[0]  # W x H, as every size the output gives
    console().print(f"wrote {out}" + (f" and {npy}" if npy else "") + f": depth {width}x{height}, {span}"
                    f"{''.join(notes)}", markup=False, highlight=False, soft_wrap=True)
    return 0


def _many(args, inputs, out: Path, options: dict) -> int:
    """A folder, pattern or video: outputs checked first, the model loaded once, a bar, one summary line; on
    Ctrl-C, exit status 130 and a line saying what was kept."""
    from ..predict_many import Tally, image_outputs, predict_images, predict_video, video_outputs

    model, video = Path(args.file), inputs.kind == "video"
    if video:
        out = into_folder(args.output, inputs.files[0], ".mp4") or out
        npy = into_folder(args.npy, inputs.files[0], ".npy") or (Path(args.npy) if args.npy else None)
        with _or_folder(inputs.files[0]):
            paths = video_outputs(inputs, out, npy, model, Path(args.prompt) if args.prompt else None)
        tally, wrote, run_many = Tally("frames"), f"wrote {paths[0]}, {paths[1]} and {paths[2]}", predict_video
    else:
        npy = None if args.npy is None else Path(args.npy) if args.npy else out
        paths = image_outputs(inputs, out, npy, model)
        tally, run_many = Tally("images"), predict_images
        wrote = f"wrote {out}" + (f" and {npy}" if npy not in (None, out) else "")
    status = status_console()

    def work(predictor) -> None:
        with item_progress(status, tally.noun, inputs.total if video else len(inputs.files),
                           video and inputs.total_estimated) as bar:
            run_many(predictor, inputs, paths, tally,
                     lambda item, ok: bar.advance(item.name, None if ok else tally.skipped[-1][1]),
                     **({"on_colour": _colouring(bar)} if video else {}))

    try:
        _with_predictor(args, work, images=inputs.source, prompts_beside=not video,
                        prompt_frames=args.prompt if video else None, exif_focal=not video, **options)
    except KeyboardInterrupt:
        return _interrupted(tally, "nothing was written (the depth video, its stack and timestamps are renamed into "
                                   "place only at the end)" if video else
                            f"the {tally.done} finished images' outputs in {out} are whole; the one in progress was "
                            "not written")
    console().print(f"{tally.line()}{_ran_on(args)}; {wrote}", markup=False, highlight=False, soft_wrap=True)
    return 0


def _videos(args, inputs, out: Path, options: dict) -> int:
    """A folder or pattern of videos: every video's outputs checked first, the model loaded once; for each video a
    bar and its own summary line (a video that cannot be read is reported and skipped), then one line for all. On
    Ctrl-C, exit status 130: the finished videos' outputs are whole, the one in progress left nothing."""
    from rich.markup import escape

    from ..predict_inputs import Item, open_video, passed_over
    from ..predict_many import Tally, predict_video, videos_outputs

    plans = videos_outputs(inputs, out, Path(args.npy) if args.npy else None, Path(args.file))
    status, tally = status_console(), Tally("videos", frames=0)
    tally.notes.append(passed_over(inputs))

    def work(predictor) -> None:
        for name, file, paths in zip(inputs.names, inputs.files, plans):
            frames = Tally("frames")
            try:
                video = open_video(file)
                with item_progress(status, name, video.total, video.total_estimated) as bar:
                    predict_video(predictor, video, paths, frames,
                                  lambda item, ok: bar.advance(item.name, None if ok else frames.skipped[-1][1]),
                                  _colouring(bar))
            except InputError as exc:
                tally.skip(Item(name, None), str(exc))
                status.print(f"[yellow]skipped[/] {escape(name)}: {escape(str(exc))}", soft_wrap=True)
                continue
            tally.done, tally.frames = tally.done + 1, tally.frames + frames.done
            console().print(f"{name}: {frames.line()}; wrote {paths[0]}, {paths[1]} and {paths[2]}",
                            markup=False, highlight=False, soft_wrap=True)

    try:
        _with_predictor(args, work, images=inputs.source, prompts_beside=False, exif_focal=False, **options)
    except KeyboardInterrupt:
        whose = "video's" if tally.done == 1 else "videos'"
        return _interrupted(tally, f"the {tally.done} finished {whose} outputs in {out} are whole; the one in "
                                   "progress left nothing")
    tally.check_any()
    console().print(f"{tally.line()}{_ran_on(args)}; wrote {out}", markup=False, highlight=False, soft_wrap=True)
    return 0


def _ran_on(args) -> str:
    """The summary's note on where the file ran: '' on the CPU; on the GPU, that every op ran there (the runner
    refuses a file the accelerator does not take whole) and in which precision."""
    if args.accelerator != "gpu":
        return ""
    compute = "FP32 compute" if args.gpu_precision == "fp32" else "FP16 compute allowed"
    return f"; every op on the LiteRT GPU accelerator ({compute}{', SwiftShader' if args.swiftshader else ''})"


def _colouring(bar):
    """``predict_video``'s ``on_colour``: the bar counts the frames again while a metric video is coloured."""

    def on_colour(done: int, total: int) -> None:
        if done == 0:
            bar.phase("colouring the depth video", total)
        else:
            bar.advance()

    return on_colour


def _with_predictor(args, work, **kwargs) -> None:
    """``work(predictor)`` with args.file loaded once (``Predictor(**kwargs)``) and the runtime's native messages
    muted (unless -v) until it is torn down, also when no input could be processed. An InputError or a Ctrl-C is
    raised without the frames that hold the predictor: it is torn down here, muted, not when the caller's handler
    ends."""
    from ..predict import Predictor
    from ..quiet import native_stderr_muted

    with native_stderr_muted(not args.verbose):
        predictor = None
        try:
            predictor = Predictor(Path(args.file), **kwargs)  # a refusal in it holds the loaded file in its frame
            work(predictor)
        except (InputError, KeyboardInterrupt, OSError) as exc:
            raise _let_go(exc) from None
        finally:
            predictor = None


def _let_go(exc: BaseException) -> BaseException:
    """``exc`` (an InputError, a Ctrl-C or a full disk), to be raised again without the frames that hold a loaded
    model (a prompt refused after the model loaded holds it in ``predict``'s frame): the model is torn down where
    this is raised, in the caller's muted block, not after the error line is printed, where LiteRT's teardown lines
    trailed it. Any other OSError keeps its traceback."""
    if isinstance(exc, OSError) and not disk_full(exc):
        return exc
    exc.__context__ = None  # an exception it interrupted (Pillow's own, inside a save) holds the frames too
    return exc.with_traceback(None)


def _interrupted(tally, kept: str) -> int:
    """Ctrl-C: what was done and what was kept, in one line; exit status 130."""
    console(stderr=True).print(f"depthport predict: interrupted after {tally.line()}: {kept}", markup=False,
                               highlight=False, soft_wrap=True)
    return 130
