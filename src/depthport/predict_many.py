"""`depthport predict` on many inputs with the model loaded once (``predict.Predictor``).

- A folder or a pattern of images: one depth PNG per image in the output folder, named after the image
  (``sub/a.jpg`` -> ``OUT/sub/a.png``; where two images share a name but for the suffix, the suffix is kept:
  ``a.jpg.png``), and with ``--npy`` a float32 ``.npy`` of the same name (beside the PNG, or in the --npy folder).
  Each pair is written whole (temp files, then rename): Ctrl-C keeps every finished image's outputs.
- A video: a colourised depth video (libx264 in the container its suffix names: .mp4, .mov, .mkv), a float32
  stack (frames, H, W) .npy, and ``<stack>.timestamps.json``: ``frame`` and ``time_s``, for each stack row its
  frame number in the source and presentation time in seconds, and ``skipped``, the frames left out and why.
  The depth video keeps the source's frame rate and each frame's timestamp (a skipped frame leaves a gap). The
  three files are written to temp files and renamed at the end: Ctrl-C leaves none of them.
- A folder or a pattern of videos: each video's three files, named after it, in the output folder
  (``videos_outputs``; ``cli.predict`` runs them one after another).

An input that cannot be read (or predicted) is reported and skipped, and counted in the summary; when none can,
it is an InputError (exit status 2)."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path, PurePosixPath
from typing import Callable

import numpy as np

from .atomic import atomic_paths
from .core.formatting import listed
from .errors import InputError, NotPerInput
from .focal import given_note, photos_note
from .outdir import WrongSuffix, check_output_file, claim_output_files, name_fits, resolved
from .predict import NotADepthMap, Predictor, turned_prompts_note, write_depth
from .preprocess import FRAMES_KEY, STRETCH_NOTED, TURNED_KEY, stretch_note
from .predict_inputs import Inputs, Item, first_images_note, hdr_note, passed_over, square_pixels_note
from .visualize import depth_range, not_finite

VIDEO_FORMATS = {".mp4": "mp4", ".mov": "mov", ".mkv": "matroska"}
# An output named like one of these is a file: for many images, -o and --npy are folders (a folder that already
# exists under such a name is used as it is)
FILE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".npy", ".npz", *VIDEO_FORMATS)
OnItem = Callable[[Item, bool], None]
SKIPS_NAMED = 4  # a summary names this many skipped inputs, then says how many more


@dataclass
class Tally:
    """What a run did so far: ``noun`` is "images", "frames" or "videos" (whose rate counts their ``frames``)."""
    noun: str
    done: int = 0
    frames: int | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)
    notes: list[str] = field(default_factory=list)  # said after the counts: a folder's videos, a truncated video, ...
    stretched: list[str] = field(default_factory=list)  # the inputs the file's input stretched (``STRETCH_NOTED``)
    most: tuple[float, tuple[int, int]] = (1.0, (1, 1))  # the largest stretch and that input's (W, H)
    not_finite: list[str] = field(default_factory=list)  # the inputs whose depth has NaN or infinite values
    resized: list[tuple[str, tuple[int, int]]] = field(default_factory=list)  # a video's frames of another size, (W, H)

    def skip(self, item: Item, error: str) -> None:
        self.skipped.append((item.name, error))

    def line(self) -> str:
        """'12 images, 1 skipped (bad.jpg: ...), 3.4 fps', then any notes ('; 2 videos (...) in the folder ...').
        One skipped input is named with its reason; several by name only ('3 skipped (a.tif, b.tif, c.tif: reasons
        above)'): each has had a line of its own with its reason, as it was skipped."""
        names = [name for name, _ in self.skipped]
        if len(names) == 1:
            shown = f" ({names[0]}: {self.skipped[0][1]})"
        elif names:
            more = f" and {len(names) - SKIPS_NAMED} more" if len(names) > SKIPS_NAMED else ""
            shown = f" ({', '.join(names[:SKIPS_NAMED])}{more}: reasons above)"
        else:
            shown = ""
        skipped = f"{len(names)} skipped{shown}"
        rate = (self.done if self.frames is None else self.frames) / max(time.perf_counter() - self.start, 1e-9)
        count = self.done + len(self.skipped)
        notes = [*self.notes, listed(self.noun[:-1], self.not_finite) + " with depth NaN or infinite in places (the "
                 "model's arithmetic overflowed?)" if self.not_finite else ""]
        note = "".join(f"; {note}" for note in notes if note)
        frames = "" if self.frames is None else f"{self.frames} frames at "
        return f"{count} {self.noun if count != 1 else self.noun[:-1]}, {skipped}, {frames}{rate:.1f} fps{note}"

    def check_any(self) -> None:
        """Nothing processed is an InputError."""
        if self.done == 0 and not self.skipped:
            raise InputError(f"no {self.noun} to process: the input holds none")
        if self.done == 0:
            name, error = self.skipped[0]
            raise InputError(f"none of the {len(self.skipped)} {self.noun} could be processed; first: {name}: {error}")


def _check_folders(out: Path, npy: Path | None, noun: str) -> None:
    """``out`` (and ``npy``) must be folders or not exist yet, and not be named like a file."""
    for option, folder in (("-o", out), ("--npy", npy)):
        if folder is not None and folder.exists() and not folder.is_dir():
            raise InputError(f"{option} {folder} is a file; for a folder or pattern of {noun}s {option} is a folder")
        if folder is not None and not folder.exists() and folder.suffix.lower() in FILE_SUFFIXES:
            raise InputError(f"{option} {folder} names a file, and a folder or pattern of {noun}s writes one file per "
                             f"{noun} into a folder; give {option} FOLDER (e.g. {folder.with_suffix('')})")


def _stems(names: list[str]) -> list[str]:
    """Each input's output name without suffix: its name less the suffix, or where two inputs share that, its name
    (``a.jpg`` and ``a.png`` give ``a.jpg`` and ``a.png``, to which the output's suffix is added)."""
    stems = [str(PurePosixPath(name).with_suffix("")) for name in names]
    count = Counter(stems)
    return [stem if count[stem] == 1 else name for stem, name in zip(stems, names)]


def image_outputs(inputs: Inputs, out: Path, npy: Path | None, model: Path) -> list[tuple[Path, Path | None]]:
    """(PNG, .npy or None) for each image of ``inputs``, checked before any work: ``out`` (and ``npy``) must be
    folders or not exist yet, and no output may overwrite an input or the model file, or be a folder (one there
    already, or one that another output goes into: 'a.png/x.jpg' beside 'a.jpg')."""
    _check_folders(out, npy, "image")
    stems = _stems(inputs.names)
    pairs = [(out / f"{stem}.png", npy / f"{stem}.npy" if npy is not None else None) for stem in stems]
    images = {resolved(file): f"the image {file}" for file in inputs.files}
    taken = images | {resolved(model): "the model file"}
    files = {path: name for pair, name in zip(pairs, inputs.names) for path in pair if path is not None}
    for option, path in ((option, path) for pair in pairs for option, path in zip(("-o", "--npy"), pair) if path):
        if (where := resolved(path)) in taken:
            read = (f": {out if option == '-o' else npy} is among what the input reads (an earlier run's outputs?): "
                    "give a folder outside it, or a pattern that leaves it out" if where in images else
                    "; give another folder")
            raise InputError(f"{option} would overwrite {taken[where]}{read}")
        if path.is_dir():
            raise InputError(f"{option} {path}, the depth of {files[path]}, is a folder; give another folder")
        name_fits(path, option)
        if clash := next((folder for folder in path.parents if folder in files), None):
            raise InputError(f"{option} {clash} would be both the depth of {files[clash]} and the folder of "
                             f"{files[path]}'s; give another folder, or rename one of them")
    for option, path in zip(("-o", "--npy"), pairs[0]):
        if path is not None:
            check_output_file(path, option, f"depth{path.suffix}")
    return pairs


def videos_outputs(inputs: Inputs, out: Path, npy: Path | None, model: Path) -> list[tuple[Path, Path, Path]]:
    """``video_outputs`` for each video of a folder or pattern, all checked before any work: ``OUT/NAME.mp4``, and
    ``NAME.npy`` with ``NAME.timestamps.json`` beside it, or in the ``npy`` folder."""
    _check_folders(out, npy, "video")
    return [video_outputs(Inputs("video", str(file), [file]), out / f"{stem}.mp4", (npy or out) / f"{stem}.npy", model)
            for file, stem in zip(inputs.files, _stems(inputs.names))]


def video_outputs(inputs: Inputs, out: Path, npy: Path | None, model: Path, prompt: Path | None = None
                  ) -> tuple[Path, Path, Path]:
    """(depth video, stack .npy, timestamps .json), checked before any work; the stack defaults to the video's
    name with .npy, the timestamps to the stack's with .timestamps.json. None of them may overwrite the video, the
    model file or the ``prompt`` stack; a video or stack named without its suffix is a ``WrongSuffix``."""
    if out.suffix.lower() not in VIDEO_FORMATS:
        raise WrongSuffix(f"-o {out}: a depth video is written as {', '.join(VIDEO_FORMATS)}; give -o NAME.mp4", "-o",
                          out, ".mp4")
    named = "--npy" if npy is not None else "the depth stack (beside -o; --npy names it)"
    npy = npy if npy is not None else out.with_suffix(".npy")
    paths = (out, npy, npy.with_suffix(".timestamps.json"))
    stack = "the depth stack is written as .npy (a float32 NumPy array, frames x H x W)"
    claim_output_files([("-o", out, None, None), (named, npy, ".npy", stack),
                        ("the timestamps (beside the stack)", paths[2], None, None)],
                       {resolved(inputs.files[0]): "the video", resolved(model): "the model file",
                        **({resolved(prompt): "the --prompt stack"} if prompt else {})})
    return paths


def _depth(predictor: Predictor, item: Item, tally: Tally, shape: tuple[int, ...] | None = None):
    """The item's depth, or None when it is skipped (the reason goes into ``tally``). ``shape``: a video's stack's
    (H, W), the first frame's: a frame of another size (a stream whose resolution changes) gets its depth at the
    stack's size, and ``tally.resized`` names it."""
    depth, error = None, item.error or "unreadable"
    if item.image is not None:
        try:
            extra = (predictor.prompt_beside(item.path) if predictor.prompts_beside and item.path else
                     predictor.prompt_frame(item.index) if predictor.prompt_frames is not None else None)
            depth = predictor.depth(item.image, extra, shape)
        except NotADepthMap:  # the file, not this input: every input would be skipped for it
            raise
        except NotPerInput as exc:  # an option that this input's size shows wrong (--focal): said with its name
            raise NotPerInput(f"{item.name}: {exc}") from None
        except InputError as exc:
            error = str(exc)
    if depth is not None and shape is not None and item.image.size != (shape[1], shape[0]) and not \
            predictor.model_size:
        tally.resized.append((item.name, item.image.size))
    if depth is None:
        tally.skip(item, error)
    else:
        if not_finite(depth):
            tally.not_finite.append(item.name)
        if (factor := predictor.stretched(item.image.size)) > STRETCH_NOTED:
            tally.stretched.append(item.name)
            tally.most = max(tally.most, (factor, item.image.size))
    return depth


def resized_note(tally: Tally, shape: tuple[int, ...] | None) -> str:
    """The summary's note on a video's frames whose size is not the first frame's (``_depth``); "" for none."""
    if not tally.resized:
        return ""
    (first, (w, h)), sizes = tally.resized[0], sorted({f"{w}x{h}" for _, (w, h) in tally.resized})
    return (f"{len(tally.resized)} frames (the first: {first}) are {', '.join(sizes)}, not the first frame's "
            f"{shape[1]}x{shape[0]}: their depth is resized to it (a stack holds one size; --model-size keeps every "
            "frame at the model's)")


def stretched_note(tally: Tally, predictor: Predictor) -> str:
    """The summary's note on the inputs the file's input stretched: the images named, or a video's frames."""
    if not tally.stretched:
        return ""
    what = "its frames" if tally.noun == "frames" else listed(tally.noun[:-1], tally.stretched)
    return stretch_note(tally.most[1], predictor.hw, what, up_to=tally.noun != "frames", exported=predictor.exported,
                        prompt_hw=predictor.prompt_hw)


def predict_images(predictor: Predictor, inputs: Inputs, outputs: list[tuple[Path, Path | None]], tally: Tally,
                   on_item: OnItem | None = None) -> None:
    """Each image's depth PNG (and .npy) written whole, one image at a time, in order."""
    tally.start = time.perf_counter()
    tally.notes.append(passed_over(inputs))
    several, turned = [], []  # (name, Frames) of the animations and multi-page TIFFs; photos turned upright
    for item, (png, npy) in zip(inputs.items(), outputs):
        depth = _depth(predictor, item, tally)
        if depth is not None:
            write_depth(depth, predictor.picture(depth), png, npy)
            tally.done += 1
            if frames := item.image.info.get(FRAMES_KEY):
                several.append((item.name, frames))
            if predictor.prompt_hw and item.image.info.get(TURNED_KEY):
                turned.append(item.name)
        if on_item:
            on_item(item, depth is not None)
    tally.notes += [first_images_note(several), photos_note(predictor.exif_focals),
                    given_note(predictor.focal, predictor.given_px), stretched_note(tally, predictor),
                    turned_prompts_note(turned) if turned else ""]
    tally.check_any()


def predict_video(predictor: Predictor, inputs: Inputs, paths: tuple[Path, Path, Path], tally: Tally,
                  on_item: OnItem | None = None, on_colour: Callable[[int, int], None] | None = None) -> None:
    """The depth video, the stack and the timestamps of ``video_outputs``, renamed into place together at the
    end; on any error or Ctrl-C none of them is left. A relative model's frames are each coloured over their own
    span (its values have no unit, each frame's own scale and shift); a metric model's over one span of metres for
    the whole video, so that a colour and the legend's ticks mean one distance in every frame: the video is
    encoded from the stack once every frame's depth is known (``_on_one_scale``), told to ``on_colour(done,
    total)``, with 0 first."""
    frames, times, skipped, last, shown, spans, turned = [], [], [], None, None, [], False
    tally.start = time.perf_counter()
    with atomic_paths(*paths) as (video_tmp, npy_tmp, stamps_tmp):
        with open(npy_tmp, "wb") as fh, _DepthVideo(video_tmp, paths[0].suffix, inputs) as video:
            stack = _Stack(fh, inputs.total, paths[1], inputs.total_estimated)
            for item in inputs.items():
                depth = _depth(predictor, item, tally, stack.shape)
                if depth is None:
                    skipped.append({"frame": item.index, "time_s": item.time, "error": tally.skipped[-1][1]})
                else:
                    stack.add(depth)
                    if predictor.metric:
                        spans.append(depth_range(depth) if not_finite(depth) < depth.size else None)
                    else:
                        video.add(predictor.picture(depth), item.time)
                    frames.append(item.index)
                    times.append(item.time)
                    video.shown = item.shown
                    tally.done += 1
                    turned = turned or TURNED_KEY in item.image.info
                if on_item:
                    on_item(item, depth is not None)
                if item.time is not None:
                    last, shown = item.time, item.shown
            tally.check_any()
            stack.finish()
            if predictor.metric:
                tally.notes.append(_on_one_scale(video, predictor, fh, spans, times, on_colour))
        early = ends_early(inputs, last, shown)
        tally.notes += [early, hdr_note(inputs), square_pixels_note(inputs), resized_note(tally, stack.shape),
                        given_note(predictor.focal, predictor.given_px),
                        stretched_note(tally, predictor),
                        _unused_prompts(predictor, len(frames) + len(skipped)),
                        turned_prompts_note(video=True) if turned and predictor.prompt_hw else ""]
        stamps_tmp.write_text(json.dumps({
            "video": inputs.files[0].name, "fps": float(inputs.fps) if inputs.fps else None,
            "stack": paths[1].name, "frame": frames, "time_s": times, "skipped": skipped,
            "declared_end_s": inputs.end_s, "ends_early": early or None}) + "\n")


def _on_one_scale(video: _DepthVideo, predictor: Predictor, fh, spans: list, times: list,
                  on_colour: Callable[[int, int], None] | None) -> str:
    """A metric model's depth video encoded from its finished stack (the open file ``fh``), every frame over
    ``video_span``; the summary's note."""
    fh.flush()
    span = video_span(spans)
    for done, (depth, seconds) in enumerate(zip(np.load(fh.name, mmap_mode="r"), times)):
        if on_colour:
            on_colour(done, len(times))
        video.add(predictor.picture(depth, span), seconds)
    if on_colour:
        on_colour(len(times), len(times))
    return f"one colour scale for the whole video, {span[0]:.3g}-{span[1]:.3g} m"


def _unused_prompts(predictor: Predictor, seen: int) -> str:
    """The summary's note on a prompt stack longer than the video (another video's stack?); "" otherwise."""
    stack = predictor.prompt_frames
    if stack is None or len(stack) <= seen:
        return ""
    return (f"the prompt stack holds {len(stack)} prompts for {seen} frames: its last {len(stack) - seen} were not "
            "used (is it this video's?)")


def video_span(spans: list[tuple[float, float] | None]) -> tuple[float, float]:
    """One (lo, hi) for a video's frames, from each frame's 2nd and 98th percentiles (None: a frame with no finite
    value): the lowest and the highest, so no frame's own span is cut."""
    known = [span for span in spans if span is not None]
    return (min(lo for lo, _ in known), max(hi for _, hi in known)) if known else (0.0, 0.0)


def ends_early(inputs: Inputs, last: float | None, shown: float | None = None) -> str:
    """"" unless the last frame read, shown for ``shown`` seconds (its packet's duration: a screen recording holds its
    last frame; else one frame interval), ends well before the end the header declares (more than half a second and
    5 % of the video short: a truncated copy or download, not a codec's trimmed first or last frame)."""
    if inputs.end_s is None or last is None:
        return ""
    end = last + max(float(1 / inputs.fps) if inputs.fps else 0.0, shown or 0.0)
    if inputs.end_s - end <= max(0.5, 0.05 * inputs.end_s):
        return ""
    return f"the video ends at {end:.1f} s of the {inputs.end_s:.1f} s its header declares (a truncated file?)"


class _Stack:
    """float32 (frames, H, W) appended to an open .npy file; ``finish`` writes the frame count into the header
    (NumPy's header leaves room for the first axis to grow, so the data does not move). With the video's frame
    count (or its estimate from the declared duration: Matroska and WebM write no count), the first frame's size
    tells how much the stack takes: more than the disk has free is an InputError then, not a disk filled an hour
    later (a minute of 4K video at 30 fps is ~60 GB of float32 depth)."""

    def __init__(self, fh, frames: int | None, path: Path, estimated: bool = False):
        self.fh, self.shape, self.count, self.offset = fh, None, 0, 0
        self.frames, self.path, self.estimated = frames, path, estimated

    def _check_room(self, shape: tuple[int, ...]) -> None:
        if not self.frames:
            return
        need, free = self.frames * int(np.prod(shape)) * 4, shutil.disk_usage(Path(self.fh.name).parent).free
        if need > free:
            h, w = shape
            frames = f"{'about ' * self.estimated}{self.frames}"
            raise InputError(f"the depth stack {self.path} of {frames} frames at {w}x{h} (float32) takes "
                             f"{need / 1e9:.1f} GB, and its disk has {free / 1e9:.1f} GB free: give "
                             "--npy PATH on a disk with room, or --model-size for depth at the model's shape")

    def _header(self) -> None:
        self.fh.seek(0)
        np.lib.format.write_array_header_1_0(
            self.fh, {"descr": "<f4", "fortran_order": False, "shape": (self.count, *self.shape)})

    def add(self, depth: np.ndarray) -> None:
        if self.shape is None:
            self._check_room(depth.shape)
            self.shape = depth.shape
            self._header()
            self.offset = self.fh.tell()
        self.fh.write(np.ascontiguousarray(depth, dtype="<f4").tobytes())
        self.count += 1

    def finish(self) -> None:
        end = self.fh.tell()
        self._header()
        if self.fh.tell() != self.offset:
            raise RuntimeError("the .npy header grew past its reserved room")
        self.fh.seek(end)


# A depth video's colour tags (FFmpeg's AVColorPrimaries, AVColorTransferCharacteristic, AVColorSpace: BT.709;
# AVColorRange: limited, PyAV's "MPEG")
TAG_BT709 = {"color_primaries": 1, "color_trc": 1, "colorspace": 1, "color_range": 1}


class _DepthVideo:
    """Pictures encoded with libx264 (yuv420p; yuv444p where a side is odd) at the source's frame rate, each at
    its source timestamp (relative to the first); the container is opened on the first picture. The pictures are
    converted with the BT.709 matrix, and the stream says so: players take BT.709 for an untagged HD video, and
    swscale's own conversion (BT.601, untagged) shifted the colour map's colours there (``TAG_BT709``).

    No B-frames: packets go out in the pictures' order, so the file lasts until its last picture's time (with
    B-frames an MP4's duration was its last decoding time: half the source's where frames were far apart). The last
    picture is shown for ``shown`` seconds, the source frame's own duration where known (a screen recording's held
    last frame)."""

    def __init__(self, path: Path, suffix: str, inputs: Inputs):
        self.path, self.format = path, VIDEO_FORMATS[suffix.lower()]
        self.rate = inputs.fps or Fraction(25)
        self.time_base = inputs.time_base or 1 / self.rate
        self.container = self.stream = self.first = self.last = self.held = self.shown = None

    def add(self, picture, seconds: float | None) -> None:
        import av

        if self.container is None:
            self.container = av.open(str(self.path), "w", format=self.format)
            self.stream = self.container.add_stream("libx264", rate=self.rate, options={"bf": "0"})
            self.stream.width, self.stream.height = picture.size
            self.stream.pix_fmt = "yuv444p" if picture.width % 2 or picture.height % 2 else "yuv420p"
            self.stream.codec_context.time_base = self.time_base
            for name, value in TAG_BT709.items():
                setattr(self.stream.codec_context, name, value)
            self.first = seconds
        pts = round((seconds - self.first) / self.time_base) if seconds is not None and self.first is not None else 0
        pts = pts if self.last is None else max(pts, self.last + 1)
        frame = av.VideoFrame.from_image(picture).reformat(format=self.stream.pix_fmt, dst_colorspace="itu709",
                                                           dst_color_range="MPEG")
        frame.pts, frame.time_base, self.last = pts, self.time_base, pts
        self._mux(self.stream.encode(frame))

    def _mux(self, packets) -> None:
        """Mux all but the last packet given so far: it waits, for ``__exit__`` to set its duration."""
        for packet in packets:
            if self.held is not None:
                self.container.mux(self.held)
            self.held = packet

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if self.container is None:
            return
        if exc_type is not None:  # the file is removed: only release it
            with contextlib.suppress(Exception):
                self.container.close()
            return
        self._mux(self.stream.encode())
        if self.held is not None:
            if self.shown:
                self.held.duration = max(self.held.duration or 0, round(self.shown / self.time_base))
            self.container.mux(self.held)
        self.container.close()
