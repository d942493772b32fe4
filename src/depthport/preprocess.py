"""Image loading and preprocessing shared by every runtime: resize, normalise, NCHW float32."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from .errors import InputError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PATCH = 14


def parse_size(text: str, multiple: int = PATCH) -> tuple[int, int]:
    """'518x686' -> (518, 686); both sides must be positive multiples of ``multiple``."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text or "")
    if not m:
        raise InputError(f"malformed size {text!r}: expected HxW, e.g. 518x686")
    h, w = int(m.group(1)), int(m.group(2))
    if h <= 0 or w <= 0 or h % multiple or w % multiple:
        raise InputError(f"size {h}x{w} is not a multiple of the patch size {multiple} on both sides")
    return h, w


def size_from_aspect(long_side: int, aspect: str, multiple: int = PATCH) -> tuple[int, int]:
    """Long side and 'W:H' aspect -> (H, W), the long side kept and the other rounded to a multiple."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)\s*", aspect or "")
    if not m or float(m.group(1)) <= 0 or float(m.group(2)) <= 0:
        raise InputError(f"malformed aspect {aspect!r}: expected W:H, e.g. 4:3")
    if long_side <= 0 or long_side % multiple:
        raise InputError(f"long side {long_side} is not a positive multiple of {multiple}")
    aw, ah = float(m.group(1)), float(m.group(2))
    short = max(multiple, round(long_side * min(aw, ah) / max(aw, ah) / multiple) * multiple)
    return (long_side, short) if ah >= aw else (short, long_side)


def load_image(path: str | Path) -> Image.Image:
    """An RGB image; a path that is not a readable image, or an image that cannot become RGB without guessing,
    is an InputError (one line, exit status 2).

    - Transparency (RGBA, LA, PA, premultiplied RGBa/La, and palette or greyscale/RGB images with a transparent
      colour) is composited onto white: pixels a viewer shows as see-through get one defined colour, whatever
      colour values the file keeps under alpha 0.
    - 16-bit and 32-bit greyscale (I;16*, I) and float images (F) are refused with a clear line: how their
      values map to the model's 8-bit RGB (full range? 12 bits stored in 16? a depth map?) cannot be known
      without guessing, so they must be converted to 8 bits first.
    - Greyscale (L, 1), palette, CMYK and YCbCr images are converted to RGB.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"image path {path} is a folder, not an image file")
    try:
        empty = path.stat().st_size == 0
    except FileNotFoundError:
        raise InputError(f"image not found: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read image {path}: {exc.strerror or exc}") from None
    if empty:
        raise InputError(f"cannot read image {path}: the file is empty (0 bytes)")
    try:
        img = Image.open(path)
        img.load()
    except FileNotFoundError:
        raise InputError(f"image not found: {path}") from None
    except UnidentifiedImageError:
        raise InputError(f"cannot read image {path}: not an image format Pillow can read") from None
    except Exception as exc:  # Pillow's decoders raise OSError, SyntaxError, ValueError, EOFError, struct.error...
        reason = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        raise InputError(f"cannot read image {path}: {reason}") from None
    if img.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        raise InputError(f"unsupported image mode {img.mode!r} in {path}: a {16 if 'I;16' in img.mode else 32}-bit "
                         "greyscale image has no defined mapping to 8-bit RGB; convert it to 8 bits first")
    if (img.mode in ("P", "L", "RGB") and "transparency" in img.info) or img.mode in ("LA", "PA", "La", "RGBa"):
        img = img.convert("RGBA")
    if img.mode == "RGBA":
        white = Image.new("RGBA", img.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, img).convert("RGB")
    if img.mode == "RGB":
        return img
    if img.mode in ("1", "L", "P", "RGBX", "CMYK", "YCbCr"):
        return img.convert("RGB")
    raise InputError(f"unsupported image mode {img.mode!r} in {path}: expected RGB, 8-bit greyscale or "
                     "an image with transparency")


def to_tensor(img: Image.Image, size_hw: tuple[int, int], normalize: bool = True, letterbox: bool = False,
              resample: int = Image.Resampling.BICUBIC) -> np.ndarray:
    """RGB image -> (1, 3, H, W) float32, resized to size_hw (stretched, or letterboxed with black bars)."""
    h, w = size_hw
    if letterbox:
        scale = min(h / img.height, w / img.width)
        nh, nw = max(1, round(img.height * scale)), max(1, round(img.width * scale))
        canvas = Image.new("RGB", (w, h))
        canvas.paste(img.resize((nw, nh), resample), ((w - nw) // 2, (h - nh) // 2))
        img = canvas
    else:
        img = img.resize((w, h), resample)
    x = np.asarray(img, dtype=np.float32) / 255.0
    if normalize:
        x = (x - np.array(IMAGENET_MEAN, np.float32)) / np.array(IMAGENET_STD, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def letterbox_box(image_hw: tuple[int, int], size_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the content inside a letterboxed input."""
    h, w = size_hw
    scale = min(h / image_hw[0], w / image_hw[1])
    nh, nw = max(1, round(image_hw[0] * scale)), max(1, round(image_hw[1] * scale))
    return (h - nh) // 2, (w - nw) // 2, nh, nw


def _nearest_multiple(n: int, multiple: int) -> int:
    """The upstream's rounding: the nearer multiple, the upper one on a tie."""
    down = (n // multiple) * multiple
    up = down + multiple
    return max(multiple, up if abs(up - n) <= abs(n - down) else down)


def da3_size(image_hw: tuple[int, int], long_side: int, multiple: int = PATCH) -> tuple[int, int]:
    """(H, W) of Depth Anything 3's upper-bound resize: longest side to ``long_side``, then each side to the
    nearest multiple (`depth_anything_3/utils/io/input_processor.py`, ``upper_bound_resize``)."""
    h, w = image_hw
    if max(h, w) != long_side:
        scale = long_side / float(max(h, w))
        h, w = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
    return _nearest_multiple(h, multiple), _nearest_multiple(w, multiple)


def _resample(img: Image.Image, size_wh: tuple[int, int]) -> Image.Image:
    """Area averaging (Pillow's BOX, OpenCV's INTER_AREA) when shrinking, bicubic when enlarging."""
    if size_wh == img.size:
        return img
    enlarge = size_wh[0] > img.width or size_wh[1] > img.height
    return img.resize(size_wh, Image.Resampling.BICUBIC if enlarge else Image.Resampling.BOX)


def da3_resize(img: Image.Image, long_side: int, multiple: int = PATCH) -> Image.Image:
    """Depth Anything 3's two-step upper-bound resize, with Pillow filters in place of OpenCV's."""
    if max(img.size) != long_side:
        scale = long_side / float(max(img.size))
        img = _resample(img, (max(1, int(round(img.width * scale))), max(1, int(round(img.height * scale)))))
    return _resample(img, (_nearest_multiple(img.width, multiple), _nearest_multiple(img.height, multiple)))


def da3_tensor(img: Image.Image, long_side: int, normalize: bool = True) -> np.ndarray:
    """RGB image -> (1, 3, H, W) float32 as Depth Anything 3 preprocesses it (H, W from `da3_size`)."""
    img = da3_resize(img, long_side)
    return to_tensor(img, (img.height, img.width), normalize=normalize)


def da3_input(img: Image.Image, size_hw: tuple[int, int], normalize: bool = True) -> np.ndarray:
    """(1, 3, H, W) for a Depth Anything 3 file built at ``size_hw``: the official two-step resize when the
    image's own upper-bound shape is the file's, else a stretch with the same filters (area when shrinking)."""
    h, w = size_hw
    long_side = max(h, w)
    if da3_size((img.height, img.width), long_side) == (h, w):
        img = da3_resize(img, long_side)
    else:
        img = _resample(img, (w, h))
    return to_tensor(img, size_hw, normalize=normalize)
