"""Image sets for parity checks: a folder of the user's images, or natural images bundled with scikit-image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from ..preprocess import InputError, load_image

# Natural photographs whose files ship inside the scikit-image wheel (no download; checked offline with
# scikit-image 0.26). Others in skimage.data (kidney, lily, skin, eagle, ...) are fetched from the network.
BUILTIN = ("astronaut", "camera", "chelsea", "coffee", "motorcycle_left", "rocket")
SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff", ".ppm", ".pgm", ".gif")


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


def folder_set(path: str | Path) -> list[tuple[str, Image.Image]]:
    """Every image file in ``path`` (or the one file ``path``), sorted by name; any unreadable one is an error."""
    path = Path(path)
    if path.is_file():
        return [(path.name, load_image(path))]
    if not path.is_dir():
        raise InputError(f"image folder not found: {path}")
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not files:
        raise InputError(f"no images in {path} (looked for {', '.join(SUFFIXES)})")
    return [(p.name, load_image(p)) for p in files]


def image_set(source: str | Path | None) -> tuple[str, list[tuple[str, Image.Image]]]:
    """(description, [(name, RGB image)]) for a folder or file, or the built-in set when ``source`` is None."""
    if source is None:
        return f"scikit-image {_skimage_version()} bundled images", builtin_set()
    return str(source), folder_set(source)


def _skimage_version() -> str:
    import skimage

    return skimage.__version__
