"""Image sets for parity checks: a folder of the user's images, or natural images bundled with scikit-image."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageFile

from ..errors import utf8_text
from ..file_kind import ARCHIVE_SUFFIXES, VIDEO_SUFFIXES
from ..preprocess import RAW_ADVICE, RAW_SUFFIXES, UNDECODED, InputError, load_image
from .formatting import in_words, listed
from .patterns import has_pattern, local_path, pattern_files, present, relative_name, set_root
from .prompts import is_prompt_file

# Natural photographs whose files ship inside the scikit-image wheel (no download; checked offline with
# scikit-image 0.26). Others in skimage.data (kidney, lily, skin, eagle, ...) are fetched from the network.
BUILTIN = ("astronaut", "camera", "chelsea", "coffee", "motorcycle_left", "rocket")
# Listed first in messages; every other suffix comes from Pillow's registry (``image_suffixes``).
COMMON_SUFFIXES = (".png", ".jpg", ".jpeg", ".heic", ".webp", ".tif", ".tiff", ".bmp", ".gif")
# .mpg/.mpeg are videos here, whatever Pillow's MPEG plugin says, and .ps/.eps documents (Pillow renders them with
# Ghostscript)
_NOT_IMAGES = (".mpg", ".mpeg", ".ps", ".eps")


@functools.cache
def image_suffixes() -> tuple[str, ...]:
    """Every file suffix of a format Pillow can open here (JPEG's .jfif/.jpe, .mpo, HEIC/HEIF and Fujifilm's .hif
    through pi-heif, TGA, PSD, ICO, QOI, ...), the common ones first: a folder is read as far as Pillow reads it.
    Stub formats (HDF5, GRIB, BUFR, WMF), which need a handler an application registers, are left out."""
    Image.init()
    readable = {ext for ext, fmt in Image.registered_extensions().items()
                if fmt in Image.OPEN and not _is_stub(Image.OPEN[fmt][0])}
    readable = (readable | {".mpo"}) - set(_NOT_IMAGES)
    return (*COMMON_SUFFIXES, *sorted(readable - set(COMMON_SUFFIXES)))


def _is_stub(factory) -> bool:
    return isinstance(factory, type) and issubclass(factory, ImageFile.StubImageFile)


def named_like_image(path: Path) -> bool:
    """Named like an image that is tried: a format Pillow reads here, or one it does not decode that people have
    (``UNDECODED``: JPEG XL, SVG), which is tried so that its line says what to do instead."""
    suffix = path.suffix.lower()
    return suffix in image_suffixes() or suffix in UNDECODED


def looked_for() -> str:
    """The suffixes a folder was searched for, in a line: the common ones, then how many more."""
    suffixes = image_suffixes()
    return f"looked for {', '.join(COMMON_SUFFIXES)} and {len(suffixes) - len(COMMON_SUFFIXES)} more suffixes " \
           "of the formats Pillow reads"


def builtin_image(name: str) -> Image.Image:
    from skimage import data

    if name == "motorcycle_left":
        array = data.stereo_motorcycle()[0]
    elif name in BUILTIN:
        array = getattr(data, name)()
    else:
        raise InputError(f"unknown built-in image {name!r}; available: {', '.join(BUILTIN)}")
    return Image.fromarray(np.asarray(array, np.uint8)).convert("RGB")


def builtin_set() -> list[tuple[str, Image.Image]]:
    return [(name, builtin_image(name)) for name in BUILTIN]


@dataclass
class FolderContents:
    """A folder's files sorted by what they are, each list sorted by name; hidden files (a dot first: macOS's
    ``._IMG_0001.JPG`` metadata twins on copied cards and drives) are left out, as a shell's ``*`` leaves them."""
    images: list[Path]  # named like an image (``named_like_image``; broken links too), prompt files left out
    videos: list[Path]
    raws: list[Path]  # camera RAW files with no image of the same name (``first_stem``) beside them
    archives: list[Path]
    others: list[Path]  # any other file: sidecars (.AAE, .json), documents
    folders: list[str]


def folder_contents(folder: str | Path) -> FolderContents:
    """What ``folder`` holds (``FolderContents``). A folder that is missing or cannot be listed is an InputError."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"image folder not found: {folder}")
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        raise InputError(f"cannot list the image folder {folder}: {exc.strerror or exc}") from None
    return _contents(entries)


def pattern_contents(pattern: str) -> FolderContents:
    """What a quoted pattern matches, sorted out as ``folder_contents`` does (no subfolders: a pattern names files);
    no match is an InputError (``pattern_files``)."""
    return _contents(pattern_files(pattern))


def _contents(entries: list[Path]) -> FolderContents:
    images = [p for p in entries if named_like_image(p) and present(p) and not is_prompt_file(p)]
    files = [p for p in entries if p.is_file() and not named_like_image(p) and not is_prompt_file(p)]
    stems = {first_stem(p) for p in images}

    def suffixed(suffixes: tuple[str, ...]) -> list[Path]:
        return [p for p in files if p.suffix.lower() in suffixes]

    return FolderContents(
        images=images, videos=suffixed(VIDEO_SUFFIXES), archives=suffixed(ARCHIVE_SUFFIXES),
        raws=[p for p in suffixed(RAW_SUFFIXES) if first_stem(p) not in stems],
        others=[p for p in files if p.suffix.lower() not in (*VIDEO_SUFFIXES, *RAW_SUFFIXES, *ARCHIVE_SUFFIXES)],
        folders=[p.name for p in entries if p.is_dir()])


def first_stem(path: Path | str) -> str:
    """The name up to its first dot, in lower case: what a RAW file and its JPEG share (IMG_0001.CR2 and
    IMG_0001.JPG; a Pixel's PXL_20240101_120000000.RAW-02.ORIGINAL.dng and PXL_20240101_120000000.RAW-01.COVER.jpg)."""
    return Path(path).name.split(".")[0].lower()


def image_files(folder: str | Path) -> list[Path]:
    """The images of ``folder`` (``folder_contents``): camera RAW files and everything else are passed over. A
    folder that is missing, cannot be listed or holds no image is an InputError naming what was looked for (and the
    RAW files, archives and subfolders it holds)."""
    contents = folder_contents(folder)
    if not contents.images:
        raise no_images(folder, contents)
    return contents.images


def no_images(folder: str | Path, contents: FolderContents) -> InputError:
    """The error for a folder with no image: what was looked for, and the RAW files, archives and subfolders it
    holds."""
    raws = sorted({p.suffix for p in contents.raws})
    raw = f"; its camera RAW files ({', '.join(raws)}) are not read: {RAW_ADVICE}" if raws else ""
    notes = "".join("; " + note for note in _aside(folder, contents))
    return InputError(f"no images in {folder} ({looked_for()}){raw}{notes}")


def _aside(folder: str | Path, contents: FolderContents) -> list[str]:
    """The notes on a folder's archives (not unpacked) and subfolders (not searched) that it holds, if any."""
    notes = [archives_note([p.name for p in contents.archives]),
             subfolders_advice(Path(folder), contents.folders) if contents.folders else ""]
    return [note for note in notes if note]


def archives_note(names: list[str]) -> str:
    """'2 archives (photos.zip, day2.tar.gz) not unpacked: unpack them first and give the folder of their images'
    for ``names``, else ''."""
    if not names:
        return ""
    them = "them" if len(names) > 1 else "it"
    return (f"{listed('archive', names)} not unpacked: unpack {them} first and give the folder of "
            f"{'their' if len(names) > 1 else 'its'} images")


def unread_note(folder: str | Path, contents: FolderContents, where: str = "in the folder") -> str:
    """What an image set read from ``folder`` (holding ``contents``) leaves out, in a line ('1 video (c.mp4) and 2
    other files (.pdf, .txt) in the folder not read (images only); 1 archive (more.zip) not unpacked: ...'), else
    ''. ``where``: 'matching the pattern' for a pattern's."""
    unread = [listed("video", [p.name for p in contents.videos]) if contents.videos else "",
              listed("camera RAW file", [p.name for p in contents.raws]) if contents.raws else "",
              others_named(contents.others) if contents.others else ""]
    notes = [f"{in_words([u for u in unread if u])} {where} not read (images only)"] if any(unread) else []
    return "; ".join(notes + _aside(folder, contents))


def others_named(names: list[str] | list[Path]) -> str:
    """'3 other files (.AAE, .json)': the suffixes of files that are neither images nor videos."""
    suffixes = sorted({Path(name).suffix or "no suffix" for name in names}, key=str.lower)
    return f"{len(names)} other file{'s' * (len(names) != 1)} ({', '.join(suffixes)})"


def subfolders_advice(folder: Path, subfolders: list[str], where: str = "in the folder") -> str:
    """'2 folders (day1, day2) in the folder not searched: for every image under it give a quoted pattern,
    'trip/**/*''."""
    return (f"{listed('folder', subfolders)} {where} not searched: for every image under it give a quoted "
            f"pattern, '{folder / '**' / '*'}'")


def set_files(source: str | Path) -> list[Path]:
    """The image files of a folder (``image_files``) or of a quoted pattern (those it matches that are named like
    images, ``'photos/**/*'``: subfolders too; prompt files left out)."""
    if Path(source).exists() or not has_pattern(str(source)):
        return image_files(source)
    files = [f for f in pattern_files(str(source)) if named_like_image(f) and not is_prompt_file(f)]
    if not files:
        raise InputError(f"the pattern {str(source)!r} matches no file named like an image ({looked_for()})")
    return files


def folder_set(path: str | Path) -> list[tuple[str, Image.Image]]:
    """Every image of ``path`` (``set_files``: one file, a folder, or a quoted pattern, as predict reads them), in
    order, read as ``load_image`` reads it (EXIF orientation applied, colours in sRGB), named relative to
    ``set_root`` in valid UTF-8 (``utf8_text``: a report holds the names); any unreadable one is an error.

    An empty folder, a folder with no file named like an image, or one where no such file can be read is an
    InputError that names the folder and the suffixes looked for; so is a pattern that matches no image file, and a
    video given as the set (which ``load_image`` would advise renaming, as for a video saved under a photo's name)."""
    if Path(path).is_file() and Path(path).suffix.lower() in VIDEO_SUFFIXES:
        raise InputError(f"{path} is a video, and an image set takes images: a folder of them, one, or a quoted "
                         "pattern ('photos/*.jpg'); `depthport predict` writes a video's depth")
    if Path(path).is_file():
        return [(utf8_text(Path(path).name), load_image(path))]
    files, root = set_files(path), set_root(path)
    images, failed = [], []
    for p in files:
        try:
            images.append((utf8_text(relative_name(p, root)), load_image(p)))
        except InputError as exc:
            failed.append((p, exc))
    if failed and not images:
        raise InputError(f"no readable images in {path} ({looked_for()}): none of its {len(files)} image file(s) "
                         f"could be read; first: {failed[0][1]}")
    if failed:
        them = "it" if len(failed) == 1 else "them"
        raise InputError(f"{failed[0][1]}; every image of the set must read, and {len(failed)} of its {len(files)} "
                         f"cannot: remove {them} or fix {them}") from None
    return images


def image_set(source: str | Path | None) -> tuple[str, list[tuple[str, Image.Image]]]:
    """(description, [(name, RGB image)]) for a folder or file, or the built-in set when ``source`` is None."""
    if source is None:
        return f"scikit-image {_skimage_version()} bundled images", builtin_set()
    return utf8_text(source), folder_set(local_path(str(source)))


def _skimage_version() -> str:
    import skimage

    return skimage.__version__
