"""The camera's focal length in pixels of a photo, from its EXIF: what Depth Anything 3 Metric needs for metres.

Phones and most cameras write the 35 mm-equivalent focal length (EXIF FocalLengthIn35mmFilm, 0xA405): the focal
length that gives the same angle of view on a 36 x 24 mm frame, compared along the diagonal. So the focal length in
pixels is ``f35 / 43.27 mm`` times the photo's diagonal in pixels, whatever its resolution, crop or orientation. The
value is rounded to whole millimetres by the camera (26 for 26.4: about 2 %), and a phone's digital zoom or a crop
made after the photo was taken without updating it makes it wrong; ``--focal`` overrides it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from PIL import ExifTags, Image

from .errors import NotPerInput

FULL_FRAME_DIAGONAL_MM = math.hypot(36.0, 24.0)
# The 35 mm-equivalent focal lengths taken as a camera's: from a 158-degree diagonal field of view, past any lens
# whose picture is a pinhole camera's (a phone's ultra-wide is 13 mm; shorter is millimetres given as pixels), to
# 0.12 degrees (a bridge camera's 3000 mm zoomed 4x digitally, with room; longer is a typing slip).
SHORTEST_35MM, LONGEST_35MM = 4.0, 20000.0


@dataclass(frozen=True)
class Focal:
    """``--focal``: pixels of the input (``1450``, ``1450px``), or millimetres in 35 mm terms (``26mm``, as a phone's
    specifications and EXIF FocalLengthIn35mmFilm give it), turned into pixels by each picture's diagonal."""

    value: float
    mm: bool = False

    @classmethod
    def parse(cls, text: str) -> Focal:
        """'1450', '1450px' or '26mm' (ValueError for anything else)."""
        number, unit = re.fullmatch(r"\s*(.*?)\s*(px|mm)?\s*", text, re.IGNORECASE).groups()
        try:
            return cls(float(number), (unit or "").lower() == "mm")
        except ValueError:
            raise ValueError(f"expected pixels (1450) or millimetres in 35 mm terms (26mm), got {text!r}") from None

    def __str__(self) -> str:
        return f"{self.value:g}{'mm' if self.mm else ''}"

    def px(self, size: tuple[int, int], given_for: tuple[int, int] | None = None) -> float:
        """The focal length in pixels of a (W, H) picture, pixels given being those of a ``given_for`` (W, H)
        picture where that is another (a video's first frame, where its frames change size); a ``NotPerInput`` where
        it makes the picture's field of view wider than any camera's (``SHORTEST_35MM``: millimetres given as
        pixels, most likely) or narrower (``LONGEST_35MM``)."""
        px = (focal_px(self.value, size) if self.mm else
              self.value * math.hypot(*size) / math.hypot(*(given_for or size)))
        f35 = px * FULL_FRAME_DIAGONAL_MM / math.hypot(*size)
        if SHORTEST_35MM <= f35 <= LONGEST_35MM:
            return px
        view = math.degrees(2 * math.atan(FULL_FRAME_DIAGONAL_MM / 2 / f35))
        given = f"--focal {self}" if self.mm else f"--focal {self} px on this {size[0]}x{size[1]} picture"
        phone = f"a phone's 26 mm main camera: {focal_px(26, size):.0f} px here"
        if f35 > LONGEST_35MM:
            raise NotPerInput(f"{given} is {f35:.3g} mm in 35 mm terms, a {view:.2g}° diagonal field of view, "
                              f"narrower than a camera's ({phone})")
        hint = ("in millimetres it is the 35 mm-equivalent one (a phone's main camera: 24-28 mm), not the lens's own"
                if self.mm else f"a focal length in pixels is near the picture's width ({phone}); for millimetres "
                f"in 35 mm terms write --focal {self}mm")
        raise NotPerInput(f"{given} is {f35:.2g} mm in 35 mm terms, a {view:.0f}° diagonal field of view, wider "
                          f"than a camera's: {hint}")


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


def given_note(focal: Focal, pixels: set[float]) -> str:
    """The note on the pixels a --focal in millimetres gave ('focal 1324 px from --focal 26mm (35 mm terms)', a range
    where the pictures' sizes differ); "" for none (pixels given as such need no note)."""
    if not pixels:
        return ""
    lo, hi = min(pixels), max(pixels)
    if round(lo) == round(hi):
        return f"focal {lo:.0f} px from --focal {focal} (35 mm terms)"
    return f"focal {lo:.0f}-{hi:.0f} px from --focal {focal} (35 mm terms, by each picture's size)"
