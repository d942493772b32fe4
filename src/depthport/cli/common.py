"""Argument types and helpers shared by the subcommands, and the console they print to."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import InputError
from ..preprocess import parse_size, size_from_aspect
from ..runtimes.litert_gpu import use_swiftshader
from ..runtimes.litert_options import ACCELERATORS, GPU_PRECISIONS


def check_prompt_input(spec, subject: str, feeds_prompt: bool) -> None:
    """One line when ``subject`` (a file, a page) feeds a prompt and the model ``spec`` takes none, or the reverse."""
    if feeds_prompt != spec.prompted:
        raise InputError(f"{subject} but {spec.id} "
                         f"{'takes a prompt beside the image' if spec.prompted else 'takes one image'}")


def model_file_missing(text: str) -> InputError:
    """The error for a model file that is not there; a model id given instead says which command makes its file."""
    from ..registry import MODELS

    if text in MODELS and not MODELS[text].hidden:
        return InputError(f"model file not found: {text} is a model id, and this command runs an exported file; "
                          f"`depthport export {text} --out DIR` writes its files (.tflite, .pte, .onnx) in DIR")
    return InputError(f"model file not found: {text}")


def console(stderr: bool = False):
    """A rich console; 160 columns when not on a terminal, so piped tables are not truncated."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160)


def status_console():
    """A console on a copy of stderr's file descriptor: what it prints (progress, warnings) still shows while
    ``quiet.native_stderr_muted`` silences the native libraries' lines on fd 2."""
    import os

    from rich.console import Console

    sys.stderr.flush()
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # stderr replaced by a Python object (a capture): no fd to mute
        return console(stderr=True)
    stream = os.fdopen(os.dup(fd), "w", buffering=1, encoding=sys.stderr.encoding, errors="surrogateescape")
    return Console(file=stream, width=None if stream.isatty() else 160)


def _count(text: str, noun: str, alternative: str = "") -> int:
    """A whole number of ``noun``s, at least 1, for an argparse ``type=`` (``alternative``: "'all' or ")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {alternative}a whole number of {noun}s >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be {alternative}at least 1 {noun}, got {value}")
    return value


def thread_count(text: str) -> int:
    """``--threads``: a whole number of CPU threads, at least 1 (an argparse ``type=``)."""
    return _count(text, "thread")


def evidence_images(text: str) -> int:
    """``--evidence-images``: 'all' (0) or a whole number of images, at least 1 (an argparse ``type=``)."""
    return 0 if text.strip().lower() == "all" else _count(text, "image", "'all' or ")


def loosened_note(err, gate_args: list[str], metric: bool = False) -> None:
    """One line on the console for --gate values looser than the defaults (a verdict of pass under them is not one
    under the defaults); nothing for tighter ones."""
    from ..verify.gates import loosened

    if names := loosened(gate_args, metric):
        err.print(f"[yellow]--gate loosens {', '.join(names)}: a pass here may fail the defaults[/]", soft_wrap=True)


def add_evidence_args(parser) -> None:
    """--no-cache and --evidence-images, shared by export and verify."""
    parser.add_argument("--no-cache", action="store_true",
                        help="compute the upstream reference's outputs and the FP16 predictions afresh instead of "
                             "reusing (and keeping) them in the evidence cache ($DEPTHPORT_CACHE, default "
                             "~/.cache/depthport/references)")
    parser.add_argument("--evidence-images", type=evidence_images, metavar="N|all",
                        help="verification images the float64 reference and the FP16-compute prediction run on "
                             "(default: as many as the evidence budget allows: every image up to Base models, 1 or 2 "
                             "of 6 for Large ones; 'all' also runs parity on every image and the rewrite ledger at "
                             "the export shape)")


def add_threads(parser, help_text: str = "CPU threads") -> None:
    parser.add_argument("--threads", type=thread_count, default=2, help=f"{help_text} (default 2)")


def add_accelerator_args(parser) -> None:
    """The --accelerator / --gpu-precision / --swiftshader options shared by predict and bench."""
    parser.add_argument("--accelerator", choices=ACCELERATORS, default="cpu",
                        help="run .tflite files on the CPU or, every op, on the LiteRT GPU accelerator")
    parser.add_argument("--gpu-precision", choices=GPU_PRECISIONS,
                        help="GPU compute precision (default fp32: GpuOptions(enforce_f32=True)); fp16 lets the "
                             "GPU compute in half precision, which can give wrong depth")
    parser.add_argument("--swiftshader", action="store_true",
                        help="with --accelerator gpu: use depthport's SwiftShader Vulkan driver (no GPU here)")


def accelerator_options(args) -> dict:
    """load_runner options from the parsed --accelerator/--gpu-precision/--swiftshader (the precision fp32 unless
    given; given without the GPU, where nothing would take it, refused as --swiftshader is)."""
    for option, given in (("--gpu-precision", args.gpu_precision), ("--swiftshader", args.swiftshader)):
        if given and args.accelerator != "gpu":
            raise InputError(f"{option} goes with --accelerator gpu")
    if args.swiftshader:
        use_swiftshader()
    args.gpu_precision = args.gpu_precision or "fp32"
    return {"accelerator": args.accelerator, "gpu_precision": args.gpu_precision}


def export_size(args, default_hw: tuple[int, int]) -> tuple[int, int]:
    """HxW from --size, or --long-side with --aspect (4:3 unless given; --aspect alone keeps the model's default
    long side), else the model's default."""
    if args.size and (args.long_side or args.aspect):
        raise InputError("give either --size or --long-side/--aspect, not both")
    if args.size:
        return parse_size(args.size)
    if args.long_side or args.aspect:
        return size_from_aspect(args.long_side or max(default_hw), args.aspect or "4:3")
    return default_hw


def images_note(err, images: str) -> None:
    """What the --images folder or quoted pattern holds or matches that its reading passes over (videos, RAW files,
    other files, archives, subfolders: ``unread_note``), said before the work; nothing for a file, or where no image
    is among them: their refusal names them."""
    from rich.markup import escape

    from ..core.images import folder_contents, pattern_contents, unread_note
    from ..core.patterns import has_pattern, local_path

    try:
        source = local_path(images)
        pattern = has_pattern(source) and not Path(source).exists()
        contents = pattern_contents(source) if pattern else folder_contents(source)
    except InputError:  # not a folder (a file), a pattern that matches nothing, or a folder that cannot be listed
        return
    where = "matching the pattern" if pattern else "in the folder"
    if not contents.images or not (note := unread_note(images, contents, where)):
        return
    err.print(f"[yellow]--images {escape(images)}: {escape(note)}[/]", soft_wrap=True)
