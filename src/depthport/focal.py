"""The camera's focal length in pixels of a photo, from its EXIF: what Depth Anything 3 Metric needs for metres.

Phones and most cameras write the 35 mm-equivalent focal length (EXIF FocalLengthIn35mmFilm, 0xA405): the focal
length that gives the same angle of view on a 36 x 24 mm frame, compared along the diagonal. So the focal length in
pixels is ``f35 / 43.27 mm`` times the photo's diagonal in pixels, whatever its resolution, crop or orientation. The
value is rounded to whole millimetres by the camera (26 for 26.4: about 2 %), and a phone's digital zoom or a crop
made after the photo was taken without updating it makes it wrong; ``--focal`` overrides it."""

from __future__ import annotations

import math

from PIL import ExifTags, Image

FULL_FRAME_DIAGONAL_MM = math.hypot(36.0, 24.0)


def focal_35mm(img: Image.Image) -> float | None:
    """An opened image's 35 mm-equivalent focal length in mm, from its EXIF; None where it has none (or says 0,
    EXIF's "unknown")."""
    try:
        value = img.getexif().get_ifd(ExifTags.IFD.Exif).get(ExifTags.Base.FocalLengthIn35mmFilm)
        value = float(value) if value is not None else None
    except (TypeError, ValueError, OSError, SyntaxError):  # a broken EXIF block: as if none
        return None
    return value if value and math.isfinite(value) and value > 0 else None


def focal_px(focal_35mm_mm: float, size: tuple[int, int]) -> float:
    """The focal length in pixels of an image of ``size`` (W, H) from its 35 mm-equivalent focal length."""
    return focal_35mm_mm * math.hypot(*size) / FULL_FRAME_DIAGONAL_MM


def photo_note(focal_35mm_mm: float, size: tuple[int, int]) -> str:
    """One photo's line: which focal length its metres used, and where it came from."""
    return (f"focal {focal_px(focal_35mm_mm, size):.0f} px from the photo's EXIF ({focal_35mm_mm:g} mm in 35 mm "
            "terms; --focal overrides it)")


def photos_note(values: list[float]) -> str:
    """A folder's summary note on the focal lengths its photos' metres used; "" where none was read."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    return (f"metres from each photo's EXIF focal length ({lo:g}{'' if lo == hi else f'-{hi:g}'} mm in 35 mm terms; "
            "--focal overrides it)")
