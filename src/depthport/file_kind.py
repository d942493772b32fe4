"""What a file holds, by its first bytes, where its name does not say or says wrong: a video saved without its
suffix, and for a file no image decoder recognised, one line on what it is and what to do instead (an archive to
unpack, a web page saved in place of the photo, a Git LFS pointer, an HDR image, a TIFF of a form Pillow does not
decode: its first image directory read, ``tiff_tags``, ...)."""

from __future__ import annotations

import logging
import shlex
from pathlib import Path

HEAD_BYTES = 512  # enough for a tar header's magic (at byte 257) and a web page's first tag

# The ISO media (MP4, QuickTime, 3GP) brands of videos; an ftyp box also starts HEIC and AVIF photos (heic, mif1,
# avif) and Canon's CR3 (crx), which are not videos
_VIDEO_BRANDS = (b"isom", b"iso2", b"iso4", b"iso5", b"iso6", b"mp41", b"mp42", b"avc1", b"M4V", b"qt  ", b"3gp",
                 b"3g2", b"MSNV", b"XAVC", b"mmp4", b"dash", b"f4v ")
# What phones, cameras and camcorders write (AVCHD's .MTS/.M2TS, older phones' .3gp), the common containers, and
# raw H.264/HEVC streams (a Raspberry Pi camera's, a drone's)
VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".mts", ".m2ts", ".3gp",
                  ".3g2", ".wmv", ".asf", ".flv", ".f4v", ".ogv", ".vob", ".mxf", ".dv", ".h264", ".264", ".h265",
                  ".265", ".hevc")
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tgz", ".gz", ".7z", ".rar", ".bz2", ".xz", ".zst")

_UNPACK = "unpack it first ({command}) and give the folder of its images"
_HDR = "{what} (high dynamic range, floating point), which Pillow does not decode: tone-map it to an 8-bit PNG first"
# Formats people have that Pillow does not decode, with what to do instead: JPEG XL's Pillow plugin is GPL-3.0
# (depthport is Apache-2.0), an SVG is a drawing with no pixels until something renders it, and HDR images hold
# floating-point light that a viewer tone-maps
JPEG_XL = "JPEG XL, which Pillow does not decode: convert it to PNG or JPEG first (djxl IMG.jxl IMG.png)"
SVG = "an SVG drawing, which has no pixels until it is rendered: render it to PNG first"
OPENEXR = _HDR.format(what="an OpenEXR image")
RADIANCE = _HDR.format(what="a Radiance HDR image")
# (magic at offset 0, what it is and what to do; {name} is the file's name, {stem} that name without its suffixes)
_MAGIC = (
    (b"PK\x03\x04", "a ZIP archive: " + _UNPACK.format(command="unzip {name} -d {stem}")),
    (b"PK\x05\x06", "an empty ZIP archive"),
    (b"\x1f\x8b", "a gzip-compressed file: " + _UNPACK.format(command="tar -xf {name}, or gunzip for one file")),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive: " + _UNPACK.format(command="7z x {name} -o{stem}")),
    (b"Rar!\x1a\x07", "a RAR archive: " + _UNPACK.format(command="unrar x {name} {stem}/")),
    (b"BZh", "a bzip2-compressed file: " + _UNPACK.format(command="tar -xf {name}")),
    (b"\xfd7zXZ\x00", "an xz-compressed file: " + _UNPACK.format(command="tar -xf {name}")),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file: " + _UNPACK.format(command="tar -xf {name}")),
    (b"%PDF-", "a PDF document: export its page as a PNG or JPEG image first"),
    (b"version https://git-lfs.github.com/spec/", "a Git LFS pointer, not the image it stands for: fetch the "
                                                    "file itself (git lfs pull)"),
    (b"\x76\x2f\x31\x01", OPENEXR),
    (b"#?RADIANCE", RADIANCE),
    (b"#?RGBE", RADIANCE),
    (b"\xff\x0a", JPEG_XL),
    (b"\x00\x00\x00\x0cJXL \r\n\x87\n", JPEG_XL),
    (b"ID3", "an audio file (MP3), with no picture to take depth from"),
    (b"fLaC", "an audio file (FLAC), with no picture to take depth from"),
)
_WEB_PAGE = ("a web page (HTML), not an image: a download that saved the page instead of the picture? Save the picture "
             "itself (or use the site's download button)")


def head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of ``path``; b"" where it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def starts_as_video(start: bytes) -> bool:
    """Whether ``start`` is how an MP4, QuickTime, 3GP, Matroska/WebM or AVI file begins."""
    return _video_suffix(start) is not None


def _video_suffix(start: bytes) -> str | None:
    """The suffix of the video ``start`` begins (.mov, .mp4, .mkv, .avi); None for anything else."""
    if start[4:8] == b"ftyp":
        return (".mov" if start[8:12] == b"qt  " else ".mp4") if start[8:12].startswith(_VIDEO_BRANDS) else None
    if start.startswith(b"\x1a\x45\xdf\xa3"):
        return ".mkv"
    return ".avi" if start[:4] == b"RIFF" and start[8:12] == b"AVI " else None


def what_it_holds(path: Path) -> str | None:
    """What ``path`` is, with what to do, for a file that no image decoder recognised: 'a ZIP archive: unpack it
    first (unzip photos.zip -d photos) and give the folder of its images', 'a web page (HTML), ...'; None where its
    first bytes match nothing known here."""
    start, stem = head(path), _stem(path)
    for magic, line in _MAGIC:
        if start.startswith(magic):
            return line.format(name=shlex.quote(path.name), stem=shlex.quote(stem))
    if form := _tiff_form(path, start):
        return (f"a TIFF of {form}, a form Pillow does not decode: save it as an 8- or 16-bit RGB TIFF, a PNG or a "
                "JPEG first")
    if start[257:262] == b"ustar":
        return "a tar archive: " + _UNPACK.format(command=f"tar -xf {shlex.quote(path.name)}")
    if suffix := _video_suffix(start):
        return f"a video, not a photo: rename it {stem}{suffix}, and predict writes its depth video"
    if start[4:12] == b"ftypM4A " or (start[:4] == b"RIFF" and start[8:12] == b"WAVE"):
        return "an audio file, with no picture to take depth from"
    text = start.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return _WEB_PAGE
    if text.startswith(b"<") and b"<svg" in text:  # after an XML declaration, comments or a DOCTYPE
        return SVG
    if start and b"\x00" not in start and _is_text(start):
        return "a text file, not an image"
    return None


_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # TIFF and BigTIFF, either byte order
# TIFF 6.0's PhotometricInterpretation and SampleFormat values, in words
_PHOTOMETRIC = {0: "greyscale", 1: "greyscale", 2: "RGB", 3: "palette", 5: "CMYK", 6: "YCbCr", 8: "CIELab",
                32844: "LogL", 32845: "LogLuv", 34892: "linear raw"}
_SAMPLE_FORMAT = {1: "", 2: " signed-integer", 3: " floating-point"}


def tiff_tags(path: Path, start: bytes | None = None) -> dict[str, int] | None:
    """How the first image of a TIFF (or BigTIFF) stores its samples, as tifffile reads its directory: {"bits": 16,
    "photometric": 2, "samples": 3, "planar": 2, "format": 1, "data": 1, "orientation": 1}, "data" 0 where the
    directory does not say where its pixels are, "orientation" the Orientation tag (1 where absent); None for any
    other file, or a TIFF whose directory does not read. ``start``: the file's first bytes, where already read."""
    if (head(path, 4) if start is None else start)[:4] not in _TIFF_MAGIC:
        return None
    import tifffile

    log = logging.getLogger("tifffile")  # its warnings on a damaged file ('missing data offset tag') go to stderr
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with tifffile.TiffFile(path) as tif:
            page = tif.pages.first
            data = bool(page.dataoffsets) and all(page.databytecounts)
            orientation = page.tags.valueof(274)
            return {"bits": int(page.bitspersample), "photometric": int(page.photometric),
                    "samples": int(page.samplesperpixel), "planar": int(page.planarconfig),
                    "format": int(page.sampleformat), "data": int(data),
                    "orientation": orientation if isinstance(orientation, int) else 1}  # a damaged value: absent
    except (OSError, ValueError, IndexError):  # tifffile.TiffFileError is a ValueError
        return None
    finally:
        log.setLevel(level)


def _tiff_form(path: Path, start: bytes) -> str | None:
    """'32-bit floating-point RGB (3 samples per pixel)' for a TIFF whose first image directory reads and says where
    its pixels are, else None (a damaged file)."""
    if (tags := tiff_tags(path, start)) is None or not tags["data"]:
        return None
    samples = tags["samples"]
    colour = _PHOTOMETRIC.get(tags["photometric"], f"photometric {tags['photometric']}")
    apart = ", its planes stored apart" if tags["planar"] == 2 and samples > 1 else ""
    return (f"{tags['bits']}-bit{_SAMPLE_FORMAT.get(tags['format'], '')} {colour} ({samples} sample"
            f"{'s' * (samples != 1)} per pixel{apart})")


def _stem(path: Path) -> str:
    """``path``'s name without its archive suffixes, or its one other suffix (photos.tar.gz -> photos, clip.jpg ->
    clip)."""
    name = Path(path.name)
    while name.suffix.lower() in ARCHIVE_SUFFIXES and name.stem:
        name = Path(name.stem)
    return name.name if name.name != path.name else name.stem


def _is_text(start: bytes) -> bool:
    """UTF-8 text (a multi-byte character cut at the end of ``start`` allowed) with no control character but
    tab, line breaks and form feed."""
    try:
        text = start.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(start) - 3:
            return False
        text = start[:exc.start].decode("utf-8")
    return all(c.isprintable() or c in "\t\r\n\f" for c in text)
