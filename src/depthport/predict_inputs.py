"""What `depthport predict` reads: one image, a folder of images, a glob pattern or a video, as a stream of items
(name, RGB image, timestamp) read one at a time, in order. An item that cannot be read carries its error instead
of an image, so that the caller reports and skips it."""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Iterator

from PIL import Image

from . import tone_map
from .core.formatting import listed
from .core.images import (archives_note, first_stem, folder_contents, named_like_image, no_images, others_named,
                          subfolders_advice)
from .core.patterns import has_pattern, local_path, pattern_files, pattern_root, present, relative_name
from .core.prompts import is_prompt_file
from .errors import InputError
from .file_kind import ARCHIVE_SUFFIXES, VIDEO_SUFFIXES, head, starts_as_video
from .outdir import resolved
from .preprocess import RAW_SUFFIXES, TURNED_KEY, Frames, load_image

_UNSPECIFIED = 2  # FFmpeg's AVCOL_SPC_UNSPECIFIED: a video that does not name its YUV matrix
_ROTATIONS = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, -180: Image.Transpose.ROTATE_180,
              -90: Image.Transpose.ROTATE_270, 270: Image.Transpose.ROTATE_270}


@dataclass
class Item:
    """One input: ``name`` is an image's path relative to its folder or pattern root, or "frame N" (N counts
    every frame of the video, skipped ones included); ``time`` a video frame's presentation time in seconds."""
    name: str
    image: Image.Image | None
    error: str | None = None
    time: float | None = None
    index: int = 0
    path: Path | None = None  # an image's file (a prompted model finds its prompt beside it)
    shown: float | None = None  # a video frame's display time in seconds, where its packet says (a held last frame)


@dataclass
class Inputs:
    """``kind`` is "image" (one file: ``predict`` handles it), "images" (a folder or a pattern: ``files``, named
    relative to ``root``), "video" (``files`` = [the video]) or "videos" (a folder or a pattern that holds videos
    and no image: ``files``, named relative to ``root``, each opened with ``open_video`` when its turn comes);
    a video's ``total`` is its header's frame count, else its declared duration times its rate (Matroska and WebM
    write no count: ``total_estimated``), else None."""
    kind: str
    source: str
    files: list[Path]
    root: Path | None = None
    total: int | None = None
    total_estimated: bool = False
    fps: Fraction | None = None
    time_base: Fraction | None = None
    end_s: float | None = None  # a video's end as its header declares it, on its frames' clock (start + duration)
    stored_wh: tuple[int, int] | None = None  # a video's frames as stored, before ``square_pixels`` and rotation
    sar: Fraction | None = None  # a video's sample aspect ratio where its pixels are not square (HDV, AVCHD, DV)
    hdr: str | None = None  # a video's HDR transfer ("HLG", "PQ"): its frames are tone-mapped (``tone_map``)
    videos: list[str] = field(default_factory=list)  # videos beside images in a folder or pattern, passed over
    stills: list[str] = field(default_factory=list)  # images beside more videos in a folder or pattern, passed over
    others: list[str] = field(default_factory=list)  # files of a folder or pattern not named like images (.json, .zip)
    folders: list[str] = field(default_factory=list)  # a folder's subfolders, not searched (a trip's day1/, day2/)
    origin: str = ""  # for "images" and "videos": "folder", "pattern" or "files" (several given one by one)

    @property
    def names(self) -> list[str]:
        """Each image file's path relative to ``root``, with forward slashes."""
        return self.relative(self.files)

    def relative(self, files: list[Path]) -> list[str]:
        return [relative_name(file, self.root) for file in files]

    def items(self) -> Iterator[Item]:
        """The items, read one at a time as the iteration reaches them."""
        if self.kind == "video":
            return _frames(self.files[0], self.fps, self.sar)
        return _images(self.files, self.names)


def open_inputs(source: str | Path) -> Inputs:
    """The inputs ``source`` names: an existing folder (its images, as ``core.images.folder_contents`` lists them,
    not recursive, and its camera RAW files without a JPEG beside them), a video (``_is_video``: by its suffix, or by
    its first bytes where its name says nothing), a quoted glob pattern (every file it matches, ``**`` recursive,
    sorted by path), else one image. A folder or pattern is its images, or its videos where it holds more videos
    than images (``_kind``); the other kind is passed over (``Inputs.videos``, ``Inputs.stills``: the summary names
    them). A folder's or a pattern's files not named like images are passed over (``Inputs.others``: Google
    Takeout's .json and the iPhone's .AAE sidecars, archives; a pattern's file with no suffix is tried). A pattern
    matching nothing, a folder or pattern with neither image nor video, or a video that cannot be opened is an
    InputError. A leading ``~`` is the home folder (a quoted pattern reaches us unexpanded); a URL is refused in one
    line."""
    text = local_path(str(source))
    path = Path(text)
    if path.is_dir():
        return _open_folder(path, text)
    if path.exists() or not has_pattern(text):
        return open_video(path) if _is_video(path) else Inputs("image", text, [path])
    matched = pattern_files(text)
    files = [f for f in matched if not is_prompt_file(f)]
    if not files:
        raise InputError(f"the pattern {text!r} matches prompt depth files only ({matched[0].name}, ...): each is read "
                         "beside its image; give the images (e.g. 'photos/*.jpg')")
    return _sorted_out(files, text, pattern_root(text), f"the pattern {text!r} matches")


def _is_video(path: Path) -> bool:
    """Named like a video (``VIDEO_SUFFIXES``), or named like nothing depthport reads (no suffix, .bin, .download)
    and starting as an MP4, QuickTime, Matroska/WebM or AVI file does: a video saved without its suffix."""
    if path.suffix.lower() in VIDEO_SUFFIXES:
        return True
    if named_like_image(path) or path.suffix.lower() in RAW_SUFFIXES:
        return False
    return starts_as_video(head(path, 12))


def open_files(sources: list[str]) -> Inputs:
    """Several files named one by one (what the shell makes of an unquoted ``photos/*.jpg``), taken as a pattern's
    matches are, in the order given: images predicted, videos and other files passed over (or, with no image, the
    videos); names relative to the files' common folder (a broken link among them is skipped as in a pattern), a
    prompt file (``NAME.prompt.png``) read beside its image, as in a folder. A folder among them (the shell's
    ``photos/*`` gives the subfolders too) is passed over, as a folder's subfolders are; folders alone, a file that
    is not there, or a URL is an InputError."""
    paths, seen, folders = [], set(), []
    for source in sources:
        path = Path(local_path(source))
        if path.is_dir():
            folders.append(path)
            continue
        if not present(path):
            raise InputError(f"input not found: {path}" if not path.exists() else f"input {path} is not a file")
        if is_prompt_file(path):
            continue
        if (named := resolved(path)) not in seen:
            seen.add(named)
            paths.append(path)
    if not paths:
        raise InputError(f"{folders[0]} is a folder, among {len(sources)} inputs that are all folders: give one folder "
                         "at a time, or a quoted pattern ('photos/**/*')" if folders else
                         f"the {len(sources)} files given are prompt depth files only: give their images")
    root = Path(os.path.commonpath([str(p.parent.absolute()) for p in paths]))
    inputs = _sorted_out(paths, f"{len(sources)} files", root, f"the {len(sources)} files given hold", origin="files")
    inputs.folders = [name if not name.startswith("..") else str(folder)
                      for folder, name in ((folder, relative_name(folder, root)) for folder in folders)]
    return inputs


def _sorted_out(files: list[Path], source: str, root: Path, what: str, origin: str = "pattern") -> Inputs:
    """A pattern's matches or the files given, sorted into images, videos and others (``open_inputs``)."""
    images, videos, others = [], [], []
    for f in files:
        (videos if _is_video(f) else images if _maybe_image(f) else others).append(f)
    if not images and not videos:
        archives = archives_note([p.name for p in others if p.suffix.lower() in ARCHIVE_SUFFIXES])
        raise InputError(f"{what} no file named like an image or a video: {others_named(others)}"
                         f"{'; ' + archives if archives else ''}")
    kind = _kind(images, videos)
    inputs = Inputs(kind, source, images if kind == "images" else videos, root=root, origin=origin)
    inputs.videos, inputs.stills = (inputs.relative(videos), []) if kind == "images" else ([], inputs.relative(images))
    inputs.others = inputs.relative(others)
    return inputs


def _kind(images: list, videos: list) -> str:
    """What a folder or pattern holding ``images`` and ``videos`` (paths or names) is: its images, or its videos
    where they are more (a folder of clips with a poster JPEG or a GIF in it: that one image was predicted and every
    clip passed over). Counted by name up to the first dot, so that a photo's RAW twin is one photo with its JPEG,
    and a Live Photo's .MOV beside its still is no clip of its own: a phone's folder stays its photos."""
    stills = {first_stem(image) for image in images}
    clips = [video for video in videos if first_stem(video) not in stills]
    return "videos" if len(clips) > len(stills) else "images"


def _maybe_image(path: Path) -> bool:
    """Named like an image (``named_like_image``, or camera RAW: each gets its advice), or with no suffix."""
    return not path.suffix or named_like_image(path) or path.suffix.lower() in RAW_SUFFIXES


def outside(inputs: Inputs, *folders: Path | None) -> Inputs:
    """``inputs`` whose subfolders named as not searched leave out the output ``folders`` (the default ``depth/`` in
    the photos' own folder, an --npy folder): the summary advised the pattern '**/*', which reads the earlier run's
    depth maps as photos. Files are not taken out: an earlier output read as an input is refused where it would be
    overwritten (``predict_many.image_outputs``), which names the output folder."""
    if inputs.root is not None:
        outs = {resolved(folder) for folder in folders if folder is not None}
        inputs.folders = [name for name in inputs.folders if resolved(inputs.root / name) not in outs]
    return inputs


def _open_folder(path: Path, text: str) -> Inputs:
    """A folder's images (``folder_contents``), with its camera RAW files that have no JPEG beside them, which are
    skipped with what to do, as a pattern's are; its videos (a phone's Live Photo .MOV beside each .HEIC), archives
    and other files are passed over, and the summary names them; a folder of videos and no image is its videos.
    Its subfolders are not searched, and the summary names them with the pattern that reads them."""
    contents = folder_contents(path)
    videos, others = [p.name for p in contents.videos], [p.name for p in contents.archives + contents.others]
    if not contents.images and not videos:
        raise no_images(path, contents)
    if _kind(contents.images, videos) == "videos":
        others += [p.name for p in contents.raws]
        return Inputs("videos", text, [path / name for name in videos], root=path, folders=contents.folders,
                      others=sorted(others), stills=[p.name for p in contents.images], origin="folder")
    return Inputs("images", text, sorted(contents.images + contents.raws), root=path, videos=videos,
                  others=sorted(others), folders=contents.folders, origin="folder")


def _on_their_own(names: list[str]) -> str:
    return "give them on their own" if len(names) > 1 else "give it on its own"


def _patterns(root: Path, names: list[str]) -> str:
    """"'clips/*.mp4'" or "'clips/*.mp4', 'clips/day1/*.mov'": a pattern for each folder and suffix of ``names``
    (relative to ``root``), in their order."""
    patterns = dict.fromkeys(root / Path(name).parent / ("*" + Path(name).suffix) for name in names)
    return ", ".join(f"'{pattern}'" for pattern in patterns)


def first_of(frames: Frames) -> str:
    """'the depth of the first of its 3 pages (a multi-page TIFF)': one image's note."""
    article = "an" if frames.kind[0] in "aeiou" else "a"
    return f"the depth of the first of its {frames.count} {frames.unit}s ({article} {frames.kind})"


def first_images_note(read: list[tuple[str, Frames]]) -> str:
    """The summary's note on the animations and multi-page TIFFs read (their first images), by kind; "" for none."""
    notes = []
    for kind, unit in {frames.kind: frames.unit for _, frames in read}.items():  # in the order first read
        names = [name for name, frames in read if frames.kind == kind]
        whose = "each one's" if len(names) != 1 else "its"
        notes.append(f"{listed(kind, names)}: the depth of {whose} first {unit}")
    return "; ".join(notes)


def passed_over(inputs: Inputs) -> str:
    """The summary's note on what a folder or pattern held beside its images and was not read; "" for nothing."""
    where = {"folder": "in the folder", "files": "among the files given"}.get(inputs.origin, "matching the pattern")
    notes = [f"{listed('video', inputs.videos)} {where} passed over: {_on_their_own(inputs.videos)}, one "
             f"video or a pattern of videos ({_patterns(inputs.root, inputs.videos)})"] if inputs.videos else []
    if inputs.stills:
        notes.append(f"{listed('image', inputs.stills)} {where} passed over (more are videos): "
                     f"{_on_their_own(inputs.stills)}, one image or a pattern of images "
                     f"({_patterns(inputs.root, inputs.stills)})")
    archives = [name for name in inputs.others if Path(name).suffix.lower() in ARCHIVE_SUFFIXES]
    if others := [name for name in inputs.others if name not in archives]:
        notes.append(f"{others_named(others)} {where} passed over, not named like "
                     f"{'videos' if inputs.kind == 'videos' else 'images'}")
    if archives:
        notes.append(archives_note(archives))
    if inputs.folders:
        notes.append(subfolders_advice(inputs.root, inputs.folders, where))
    return "; ".join(notes)


def _images(files: list[Path], names: list[str]) -> Iterator[Item]:
    for index, (file, name) in enumerate(zip(files, names)):
        try:
            image = load_image(file)
        except InputError as exc:
            yield Item(name, None, str(exc), index=index, path=file)
            continue
        yield Item(name, image, index=index, path=file)


def open_video(path: Path) -> Inputs:
    """One video's header: its frame count, rate and time base; one that cannot be opened is an InputError."""
    import av

    if not path.is_file():
        raise InputError(f"video not found: {path}" if not path.exists() else f"video path {path} is not a file")
    if image := _image_format(path):
        raise InputError(f"cannot read video {path}: an image ({image}), not a video: rename it "
                         f"{path.stem}.{_IMAGE_SUFFIX.get(image, image.lower())}, and predict writes its depth map")
    if path.stat().st_size == 0:
        raise InputError(f"cannot read video {path}: the file is empty (a copy or download that did not start?)")
    try:
        with av.open(str(path)) as container:
            if (stream := _picture_stream(container)) is None:
                cover = " (its only picture is cover art, an audio file's)" if container.streams.video else ""
                raise InputError(f"{path} has no video stream{cover}")
            fps, span = _frame_rate(container, stream), _declared_span(container, stream)
            estimate = max(1, round(span[1] * fps)) if not stream.frames and span and span[1] and fps else None
            return Inputs("video", str(path), [path], total=stream.frames or estimate,
                          total_estimated=estimate is not None, fps=fps, time_base=stream.time_base,
                          end_s=sum(span) if span else None, stored_wh=(stream.width, stream.height),
                          sar=_non_square(stream.sample_aspect_ratio),
                          hdr=tone_map.NAMES.get(stream.codec_context.color_trc))
    except av.error.FFmpegError as exc:
        cut = (" (damaged, or cut short: a copy or download that stopped part-way? An MP4 or MOV often keeps its "
               "index at its end)" if isinstance(exc, av.error.InvalidDataError) else
               " (it ends before its first frame)" if isinstance(exc, av.error.EOFError) else "")
        raise InputError(f"cannot read video {path}: {_reason(exc)}{cut}") from None


def _frame_rate(container, stream) -> Fraction | None:
    """The frames' rate: a raw H.264/HEVC stream's is the one its own header (SPS) states, where FFmpeg's demuxer
    gives 25 whatever it says; its frames have no times, and their place at this rate is theirs."""
    if container.format.name in ("h264", "hevc"):
        return stream.guessed_rate or stream.average_rate
    return stream.average_rate or stream.guessed_rate


def _picture_stream(container):
    """The container's video stream with the most pixels, the first of those, as ffmpeg's own choice; a still attached
    to the file (an audio file's cover art, which FFmpeg lists as a one-frame video stream) is not one. None if
    there is none."""
    import av

    attached = av.stream.Disposition.attached_pic
    streams = [s for s in container.streams.video if not s.disposition & attached]
    return max(streams, key=lambda s: (s.width or 0) * (s.height or 0), default=None)


_IMAGE_SUFFIX = {"JPEG": "jpg", "TIFF": "tif", "HEIF": "heic", "JPEG2000": "jp2"}


def _image_format(path: Path) -> str | None:
    """The format of an image saved under a video's name ('PNG'; FFmpeg would read it as a one-frame video), else
    None. Pillow's MPEG is a video's header, which it names but does not decode."""
    try:
        with Image.open(path) as img:
            return img.format if img.format != "MPEG" else None
    except Exception:  # not an image Pillow knows
        return None


def _declared_span(container, stream) -> tuple[float, float] | None:
    """(start, duration) of the video stream as its header declares them, in seconds of its frames' clock: the
    stream's own (MP4, MOV), else the container's (Matroska, WebM); None when neither is written. A Matroska
    segment's duration counts from time 0, not from its first frame, and lasts as long as its longest track: the
    video track's own end (the DURATION tag that FFmpeg and mkvmerge write) is taken where there is one."""
    if stream.duration is not None:
        return float((stream.start_time or 0) * stream.time_base), float(stream.duration * stream.time_base)
    if container.duration is not None:  # av.time_base: microseconds
        start, duration = (container.start_time or 0) / 1e6, container.duration / 1e6
        if "matroska" in container.format.name:
            end = _clock_seconds(stream.metadata.get("DURATION")) or duration
            duration = end - start if end > start else duration
        return start, duration
    return None


def _clock_seconds(text: str | None) -> float | None:
    """'00:01:02.500000000' -> 62.5; None for anything else."""
    try:
        hours, minutes, seconds = (text or "").split(":")
        return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    except ValueError:
        return None


DAMAGED = "damaged: parts of it did not decode (the decoder filled them in)"


def _reason(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or (str(exc).splitlines() or [type(exc).__name__])[0]


def _frames(path: Path, fps: Fraction | None, sar: Fraction | None = None) -> Iterator[Item]:
    """The video's frames as players show them on an ordinary screen: in SDR colours (``sdr_image``), with square
    pixels (``square_pixels``, its sample aspect ratio ``sar``) and upright (its display rotation applied), in
    presentation order, each with its place in that order (``_Places``). A packet that does not decode, a frame
    the decoder gives damaged, or one that does not convert to RGB, is an item with its error; a container that
    cannot be read further ends the stream with one."""
    import av

    with av.open(str(path)) as container:
        stream = _picture_stream(container)
        packets, places = container.demux(stream), _Places(fps)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                yield from places.failed_before(None)
                return
            except av.error.FFmpegError as exc:
                yield from places.failed_before(None)
                yield places.item(None, None, f"cannot read the rest of the video: {_reason(exc)}", None)
                return
            try:
                frames = packet.decode()
            except av.error.FFmpegError as exc:
                time = packet.pts * stream.time_base if packet.pts is not None else None
                yield from places.failed(packet.pts, time, f"cannot decode: {_reason(exc)}")
                continue
            for frame in frames:
                yield from places.failed_before(frame.pts)
                yield places.item(frame.pts, *_picture(frame, sar), frame.time,
                                  float(frame.duration * frame.time_base) if frame.duration else None)


def _picture(frame, sar: Fraction | None) -> tuple[Image.Image | None, str | None]:
    """A decoded frame as ``_frames`` gives it, or why not: the decoder filled in parts of it that did not decode
    (a player shows the smear: FFmpeg outputs such a frame flagged corrupt), or it does not convert to RGB."""
    if frame.is_corrupt:
        return None, DAMAGED
    try:
        return upright(square_pixels(sdr_image(frame), sar), frame.rotation), None
    except Exception as exc:  # a pixel format swscale cannot convert, a broken frame
        return None, f"cannot convert to RGB: {_reason(exc)}"


class _Places:
    """Items numbered in presentation order. A packet that does not decode is known in decoding order, before frames
    shown earlier where the video has B-frames: its item waits until those are out. A frame the decoder gives after
    one shown later (a damaged stream) is an item with that error, not a row out of order."""

    def __init__(self, fps: Fraction | None):
        self.fps, self.waiting, self.count, self.last = fps, [], 0, None

    def item(self, pts: int | None, image: Image.Image | None, error: str | None, time,
             shown: float | None = None) -> Item:
        index, self.count = self.count, self.count + 1
        if image is not None and pts is not None:
            if self.last is not None and pts < self.last:
                image, error = None, "given by the decoder after frames shown later (a damaged stream)"
            else:
                self.last = pts
        return Item(f"frame {index}", image, error, _seconds(time, index, self.fps), index, shown=shown)

    def failed(self, pts: int | None, time, error: str) -> Iterator[Item]:
        if pts is None:
            yield self.item(None, None, error, time)
        else:
            heapq.heappush(self.waiting, (pts, time, error))

    def failed_before(self, pts: int | None) -> Iterator[Item]:
        """The waiting failed packets shown before a frame at ``pts`` (None: all of them)."""
        while self.waiting and (pts is None or self.waiting[0][0] < pts):
            waited, time, error = heapq.heappop(self.waiting)
            yield self.item(waited, None, error, time)


def _seconds(time, index: int, fps: Fraction | None) -> float | None:
    """A frame's presentation time; where the video has none, its place at the frame rate."""
    if time is not None:
        return float(time)
    return float(index / fps) if fps else None


def sdr_image(frame) -> Image.Image:
    """A decoded frame in sRGB: an HDR one (PQ or HLG transfer) tone-mapped as a player shows it on an SDR screen
    (``tone_map.to_sdr``), any other converted by swscale with its own colour matrix and range. A frame whose
    matrix is not tagged takes the one players assume (``assumed_matrix``): swscale would take BT.601 for all."""
    if tone_map.is_hdr(frame.color_trc):
        return Image.fromarray(tone_map.to_sdr(frame.to_ndarray(format="gbrpf32le"), frame.color_trc))
    if frame.colorspace == _UNSPECIFIED:
        return frame.reformat(format="rgb24", src_colorspace=assumed_matrix(frame.width, frame.height)).to_image()
    return frame.to_image()


def assumed_matrix(width: int, height: int) -> str:
    """The YUV matrix players assume for a video that does not name its own: BT.709 for HD (wider than 1279 or
    taller than 576 pixels), BT.601 for SD (mpv's rule, ``mp_csp_guess_colorspace``)."""
    return "itu709" if width >= 1280 or height > 576 else "itu601"


def hdr_note(inputs: Inputs) -> str:
    """The summary's note on an HDR video's tone mapping; "" for an SDR one."""
    return f"HDR video ({inputs.hdr}): its frames tone-mapped to SDR, as a player shows them on an ordinary " \
           "screen" if inputs.hdr else ""


def _non_square(sar: Fraction | None) -> Fraction | None:
    """A sample aspect ratio that is written and is not 1:1 (0:1 and None say nothing), else None."""
    return sar if sar and sar != 1 else None


def square_pixels(image: Image.Image, sar: Fraction | None) -> Image.Image:
    """A frame stored with non-square pixels (sample aspect ratio ``sar``: HDV's and AVCHD's 1440x1080 shown at
    1920x1080, NTSC DV's 720x480 at 640x480) resized to the shape players show it: its width times ``sar``, its
    height kept (bicubic)."""
    if not sar:
        return image
    return image.resize((_shown_width(image.width, sar), image.height), Image.Resampling.BICUBIC)


def _shown_width(width: int, sar: Fraction) -> int:
    return max(1, round(width * sar))


def square_pixels_note(inputs: Inputs) -> str:
    """The summary's note on a video stored with non-square pixels; "" for square ones."""
    if not inputs.sar or not inputs.stored_wh:
        return ""
    w, h = inputs.stored_wh
    return (f"its {w}x{h} frames have non-square pixels (sample aspect ratio {inputs.sar.numerator}:"
            f"{inputs.sar.denominator}): read at {_shown_width(w, inputs.sar)}x{h}, as players show them")


def upright(image: Image.Image, rotation: int) -> Image.Image:
    """A video frame as players show it: rotated counter-clockwise by its display matrix's ``rotation``
    (PyAV's ``VideoFrame.rotation``); angles that are not a multiple of 90 degrees are ignored. A quarter turn is
    kept in ``info[TURNED_KEY]``, as a photo's EXIF orientation is."""
    method = _ROTATIONS.get(int(round(rotation or 0)))
    if method is None:
        return image
    turned = image.transpose(method)
    if method in (Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_270):
        turned.info[TURNED_KEY] = int(round(rotation))
    return turned
