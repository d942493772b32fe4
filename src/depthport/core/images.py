"""Image sets for parity checks: a folder of the user's images, or natural images bundled with scikit-image."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
from PIL import Image, ImageFile

from ..errors import utf8_text
from ..file_kind import ARCHIVE_SUFFIXES
from ..preprocess import RAW_ADVICE, RAW_SUFFIXES, UNDECODED, InputError, load_image
from .formatting import listed
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


def image_files(folder: str | Path) -> list[Path]:
    """The files in ``folder`` named like an image (``named_like_image``; broken links too), sorted by name; hidden
    files (a dot first: macOS's ``._IMG_0001.JPG`` metadata twins on copied cards and drives) are passed over, as a
    shell's ``*`` passes them over, and so are camera RAW files (a camera writes a JPEG beside each). A folder that
    is missing, cannot be listed or holds no image is an InputError naming what was looked for (and the RAW files,
    if it holds those)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"image folder not found: {folder}")
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        raise InputError(f"cannot list the image folder {folder}: {exc.strerror or exc}") from None
    files = [p for p in entries if named_like_image(p) and present(p) and not is_prompt_file(p)]
    if not files:
        raws = sorted({p.suffix for p in entries if p.suffix.lower() in RAW_SUFFIXES and p.is_file()})
        raw = f"; its camera RAW files ({', '.join(raws)}) are not read: {RAW_ADVICE}" if raws else ""
        notes = [note for note in (archives_note(entries), subfolders_note(folder)) if note]
        raise InputError(f"no images in {folder} ({looked_for()}){raw}{''.join('; ' + n for n in notes)}")
    return files


def archives_note(files: list[Path]) -> str:
    """'2 archives (photos.zip, day2.tar.gz) not unpacked: unpack them first and give the folder of their images'
    for the archives among ``files`` (by suffix), else ''."""
    archives = [p.name for p in files if p.suffix.lower() in ARCHIVE_SUFFIXES and p.is_file()]
    if not archives:
        return ""
    them = "them" if len(archives) > 1 else "it"
    return (f"{listed('archive', archives)} not unpacked: unpack {them} first and give the folder of "
            f"{'their' if len(archives) > 1 else 'its'} images")


def subfolders_note(folder: str | Path) -> str:
    """``subfolders_advice`` for a folder with subfolders (which a folder's reading passes over), else ''."""
    folder = Path(local_path(str(folder)))
    try:
        subfolders = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:  # not a folder (a file, a pattern), or one that cannot be listed
        return ""
    return subfolders_advice(folder, subfolders) if subfolders else ""


def subfolders_advice(folder: Path, subfolders: list[str]) -> str:
    """'2 folders (day1, day2) in the folder not searched: for every image under it give a quoted pattern,
    'trip/**/*''."""
    return (f"{listed('folder', subfolders)} in the folder not searched: for every image under it give a quoted "
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
    InputError that names the folder and the suffixes looked for; so is a pattern that matches no image file."""
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
        raise InputError(str(failed[0][1])) from None
    return images


def image_set(source: str | Path | None) -> tuple[str, list[tuple[str, Image.Image]]]:
    """(description, [(name, RGB image)]) for a folder or file, or the built-in set when ``source`` is None."""
    if source is None:
        return f"scikit-image {_skimage_version()} bundled images", builtin_set()
    return utf8_text(source), folder_set(local_path(str(source)))


def _skimage_version() -> str:
    import skimage

    return skimage.__version__
