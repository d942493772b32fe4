"""Image sets for parity checks: a folder of the user's images, or natural images bundled with scikit-image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from ..preprocess import InputError, load_image
from .prompts import is_prompt_file

# Natural photographs whose files ship inside the scikit-image wheel (no download; checked offline with
# scikit-image 0.26). Others in skimage.data (kidney, lily, skin, eagle, ...) are fetched from the network.
BUILTIN = ("astronaut", "camera", "chelsea", "coffee", "motorcycle_left", "rocket")
# .jfif/.jpe: JPEGs as browsers and messengers save them; .mpo: multi-picture JPEGs of stereo and some phone cameras;
# .heic/.heif (iPhone photos) are listed so that they are tried and reported, not silently passed over
SUFFIXES = (".png", ".jpg", ".jpeg", ".jfif", ".jpe", ".mpo", ".apng", ".bmp", ".webp", ".tif", ".tiff", ".ppm",
            ".pgm", ".pbm", ".pnm", ".gif", ".jp2", ".avif", ".heic", ".heif")
LOOKED_FOR = f"looked for {', '.join(SUFFIXES)}"


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
    """The files in ``folder`` named like an image (``SUFFIXES``), sorted by name; a folder that is missing,
    cannot be listed or holds none is an InputError naming the suffixes looked for."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"image folder not found: {folder}")
    try:
        files = sorted(p for p in folder.iterdir()
                       if p.is_file() and p.suffix.lower() in SUFFIXES and not is_prompt_file(p))
    except OSError as exc:
        raise InputError(f"cannot list the image folder {folder}: {exc.strerror or exc}") from None
    if not files:
        raise InputError(f"no images in {folder} ({LOOKED_FOR})")
    return files


def folder_set(path: str | Path) -> list[tuple[str, Image.Image]]:
    """Every image file in ``path`` (or the one file ``path``), sorted by name, read as ``load_image`` reads it
    (EXIF orientation applied, colours in sRGB); any unreadable one is an error.

    An empty folder, a folder with no file named like an image, or one where no such file can be read is an
    InputError that names the folder and the suffixes looked for."""
    path = Path(path)
    if path.is_file():
        return [(path.name, load_image(path))]
    files = image_files(path)
    images, failed = [], []
    for p in files:
        try:
            images.append((p.name, load_image(p)))
        except InputError as exc:
            failed.append((p, exc))
    if failed and not images:
        raise InputError(f"no readable images in {path} ({LOOKED_FOR}): none of its {len(files)} image file(s) "
                         f"could be read; first: {failed[0][1]}")
    if failed:
        raise InputError(str(failed[0][1])) from None
    return images


def image_set(source: str | Path | None) -> tuple[str, list[tuple[str, Image.Image]]]:
    """(description, [(name, RGB image)]) for a folder or file, or the built-in set when ``source`` is None."""
    if source is None:
        return f"scikit-image {_skimage_version()} bundled images", builtin_set()
    return str(source), folder_set(source)


def _skimage_version() -> str:
    import skimage

    return skimage.__version__
