"""Image loading and preprocessing shared by every runtime: resize, normalise, NCHW float32."""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import shlex
import struct
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pi_heif
from PIL import Image, ImageOps, TiffImagePlugin, UnidentifiedImageError

from .errors import InputError
from .file_kind import JPEG_XL, OPENEXR, RADIANCE, SVG, tiff_tags, what_it_holds
from .focal import focal_35mm

# HEIC/HEIF (the iPhone's default, Samsung's and Fujifilm's .HIF) through libheif: pi-heif is pillow-heif's decoding
# build (libheif and libde265, LGPL, no GPL encoder). It applies the file's own rotation and mirroring (irot/imir)
# and then sets its EXIF orientation to 1, so ``ImageOps.exif_transpose`` does not turn the photo a second time.
pi_heif.register_heif_opener(thumbnails=False, depth_images=False, aux_images=False)

# Camera RAW (sensor data to be developed: demosaicing, white balance, tone curve). Pillow opens the TIFF-based ones
# (DNG, CR2, NEF, ARW, ...) as their first image, a small preview or nothing: they are refused by suffix instead.
RAW_SUFFIXES = (".dng", ".cr2", ".cr3", ".crw", ".nef", ".nrw", ".arw", ".srf", ".sr2", ".orf", ".rw2", ".raf",
                ".pef", ".srw", ".x3f", ".3fr", ".iiq", ".rwl", ".erf", ".kdc", ".dcr", ".mrw", ".mos")
RAW_ADVICE = "camera RAW is sensor data to be developed; export a JPEG or TIFF from the camera's app or a raw converter"
# Image formats people have that Pillow does not decode, by suffix, with what to do instead (``file_kind``)
UNDECODED = {".jxl": JPEG_XL, ".svg": SVG, ".svgz": SVG, ".exr": OPENEXR, ".hdr": RADIANCE}

# Pillow warns above 89 megapixels and refuses above 179 (its guard against decompression bombs), and phones shoot
# 200-megapixel photos (16320x12240): depthport reads up to MAX_PIXELS (268) and refuses a larger image in one line,
# from its header, before decoding it.
MAX_PIXELS = 2**28
FOCAL_KEY = "focal_35mm"  # in a loaded image's info: its EXIF 35 mm-equivalent focal length (``focal.focal_35mm``)
QUARTER_TURNS = (5, 6, 7, 8)  # EXIF/TIFF orientations that turn the stored image a quarter (and may mirror it)
TURNED_KEY = "turned_upright"  # in a loaded image's info: its EXIF orientation, where that turned it a quarter
FRAMES_KEY = "more_images"  # in a loaded image's info: the ``Frames`` of a file of several images (the first read)
ANIMATED_FORMATS = ("GIF", "PNG", "WEBP")  # animations; an MPO's or HEIF's other images are not frames a viewer plays

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
        near = [max(multiple, round(v / multiple) * multiple) for v in (h, w)]
        raise InputError(f"size {h}x{w} (height x width) is not a multiple of the patch size {multiple} on both "
                         f"sides; the nearest is {near[0]}x{near[1]}")
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
    """An RGB image as an image viewer shows it; a path that is not a readable image, or an image that cannot
    become RGB without guessing, is an InputError (one line, exit status 2).

    - EXIF orientation (all eight) is applied (``ImageOps.exif_transpose``): the image has the displayed shape; one
      that turned it a quarter is kept in ``info[TURNED_KEY]`` (a prompt in the camera's orientation is not turned).
    - HEIC/HEIF photos are read through pi-heif (libheif): their rotation applied once, 10-bit read at 8 bits.
    - A multi-frame file (animated GIF, PNG or WebP, multi-page TIFF, MPO, HEIF sequence) gives its first frame;
      an animation's frames or a TIFF's pages are counted in ``info[FRAMES_KEY]``, so that the output can say so.
    - An embedded ICC profile converts the colours to sRGB (``ImageCms``, perceptual intent); a profile that
      cannot be read or does not fit the image's colour space is ignored, as viewers ignore it.
    - Greyscale (L, 1), palette, CMYK, YCbCr, LAB and HSV images become RGB (Pillow's conversions where no
      profile says otherwise); 16-bit RGB(A) is read at 8 bits, as Pillow reads it.
    - Transparency (RGBA, LA, PA, premultiplied RGBa/La, and palette or greyscale/RGB images with a transparent
      colour) is composited onto white: pixels a viewer shows as see-through get one defined colour, whatever
      colour values the file keeps under alpha 0.
    - 16-bit greyscale (I;16*: PNG, TIFF) is read at its full range, as viewers show it and as Pillow reads
      16-bit RGB: the high byte of each sample (a transparent grey level becomes alpha). So is a Netpbm greyscale
      file (PGM, PNM) of maxval above 255 (10-, 12-, 16-bit), which Pillow reads as I scaled to 0..65535.
    - Up to ``MAX_PIXELS`` (268 megapixels: a phone's 200-megapixel photo is read); a larger image is refused
      with a clear line from its header, before anything is decoded.
    - Camera RAW files (``RAW_SUFFIXES``) are refused with a clear line: a viewer develops them, Pillow would
      give an embedded preview at best; JPEG XL, SVG and HDR (OpenEXR, Radiance) files (``UNDECODED``) that Pillow
      cannot open get a line of their own saying what to do, and so does any other file whose first bytes say what
      it is (``file_kind``: an archive, a PDF, a web page saved in place of a photo, a Git LFS pointer, ...).
    - The EXIF 35 mm-equivalent focal length, where the file has one, is kept in ``info[FOCAL_KEY]`` (mm): the
      metres of models that need the focal length come from it when ``--focal`` is not given.
    - Other 32-bit integer (I) and float (F) images are refused with a clear line: viewers agree on no mapping of
      their values to 8-bit RGB (full range? 0..1? a depth map?), so they must be converted to 8 bits first.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"image path {path} is a folder, not an image file")
    try:
        empty = path.stat().st_size == 0
    except FileNotFoundError:
        raise InputError(f"image not found: {path}{broken_link(path)}") from None
    except OSError as exc:
        raise InputError(f"cannot read image {path}: {exc.strerror or exc}") from None
    if empty:
        raise InputError(f"cannot read image {path}: the file is empty (0 bytes)")
    if path.suffix.lower() in RAW_SUFFIXES:
        raise InputError(f"cannot read image {path}: {RAW_ADVICE}")
    try:
        with _pillow_for(path), Image.open(path) as img:
            if (pixels := img.width * img.height) > MAX_PIXELS:
                raise InputError(f"cannot read image {path}: {img.width}x{img.height} is {pixels / 1e6:.0f} "
                                 f"megapixels, above the {MAX_PIXELS / 1e6:.0f} depthport reads; downscale it first")
            frames = _more_images(img)
            img.load()
            netpbm_wide = img.format == "PPM" and img.mode == "I"  # a PGM of maxval > 255, at 0..65535
            if img.mode in ("I", "F") and not netpbm_wide:
                what = "a floating-point" if img.mode == "F" else "a 32-bit or signed integer"
                raise InputError(f"unsupported image mode {img.mode!r} in {path}: {what} greyscale image has no "
                                 "defined mapping to 8-bit RGB; convert it to 8 bits first")
            f35 = focal_35mm(img)
            white_is_zero = img.format == "TIFF" and img.tag_v2.get(262) == 0  # Photometric: WhiteIsZero
            turned = img.info.get("original_orientation") or img.getexif().get(0x0112)  # pi-heif turned a HEIC
            img = ImageOps.exif_transpose(img)
            wide_grey = netpbm_wide or img.mode.startswith("I;16")
            rgb = _to_rgb(_grey_8bit(img, white_is_zero) if wide_grey else img, path)
            if f35:
                rgb.info[FOCAL_KEY] = f35
            if frames:
                rgb.info[FRAMES_KEY] = frames
            if turned in QUARTER_TURNS:
                rgb.info[TURNED_KEY] = turned
            return rgb
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"image not found: {path}") from None
    except UnidentifiedImageError:
        raise InputError(f"cannot read image {path}: {_unidentified(path)}") from None
    except Exception as exc:  # Pillow's decoders raise OSError, SyntaxError, ValueError, EOFError, struct.error...
        reason = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        if reason.startswith("image file is truncated") or reason == "Truncated File Read":  # Pillow's words
            reason = f"the file ends early (a copy or a download cut short?): {reason}"
        elif reason == "could not create decoder object":  # libwebp's, for a damaged or cut-short WebP
            reason = f"the file is damaged or cut short ({reason})"
        elif reason == "Unable to locate Ghostscript on paths":  # Pillow renders PostScript through Ghostscript
            reason = (f"a PostScript or EPS drawing, which Pillow renders only through Ghostscript (not installed): "
                      f"render it to PNG first (gs -sDEVICE=png16m -r150 -o {shlex.quote(path.stem + '.png')} "
                      f"{shlex.quote(path.name)})")
        elif isinstance(exc, (OSError, SyntaxError, ValueError, EOFError, struct.error)):
            # a decoder's own words: 'broken data stream when reading image file', 'Unsupported BMP header type (99)'
            reason = f"the file is damaged, or a variant of its format Pillow does not decode: {reason}"
        raise InputError(f"cannot read image {path}: {reason}") from None


class Frames(NamedTuple):
    """The images a viewer steps through in a file of several, of which ``load_image`` read the first."""

    count: int
    unit: str  # "frame", "page"
    kind: str  # "animated image", "multi-page TIFF"


def _more_images(img: Image.Image) -> Frames | None:
    """An animation's frames, or a TIFF's pages less the reduced-resolution copies (previews) and transparency masks
    a scanner or an editor stores beside a page (NewSubfileType bits 0 and 2); None for a single image, and for a
    TIFF whose later directories do not read (its first image still does). Counted before the first image is
    decoded: seeking a TIFF after would decode it again."""
    if img.format in ANIMATED_FORMATS and getattr(img, "is_animated", False):
        return Frames(img.n_frames, "frame", "animated image")
    if img.format != "TIFF":
        return None
    pages = 0
    try:
        for index in range(img.n_frames):
            img.seek(index)
            pages += not img.tag_v2.get(254, 0) & 0b101
    except Exception:  # noqa: BLE001 (any of Pillow's errors: the count is a note; the first image still reads)
        pages = 0
    img.seek(0)
    return Frames(pages, "page", "multi-page TIFF") if pages > 1 else None


def _unidentified(path: Path) -> str:
    """Why Pillow recognised no image in ``path``: named as a format it does not decode (``UNDECODED``: an .svgz is
    gzip inside), what its first bytes show it is (``file_kind.what_it_holds``: an archive, a web page, a PDF,
    ...), else by its suffix: a format Pillow reads (the file is damaged, cut short before its header ends, or
    another kind of file), or one it does not know."""
    suffix = path.suffix.lower()
    if suffix in UNDECODED:
        return UNDECODED[suffix]
    if kind := what_it_holds(path):
        return kind
    if suffix in Image.registered_extensions():
        return f"not a {suffix} image Pillow can read: damaged, cut short, or another kind of file named {suffix}"
    return "not an image format Pillow can read"


def broken_link(path: Path) -> str:
    """', a link to TARGET, which is not there' for a symbolic link whose target is missing (a folder of links into
    a drive that is not mounted), else ''."""
    if not path.is_symlink():
        return ""
    with contextlib.suppress(OSError):
        return f", a link to {os.readlink(path)}, which is not there"
    return ""


@contextlib.contextmanager
def _pillow_for(path: Path):
    """Pillow's settings while ``path`` is read: its decompression-bomb guard off (``load_image`` applies
    ``MAX_PIXELS`` itself), and decoding through libtiff for two kinds of uncompressed TIFF that Pillow 13.0's own
    reader decodes wrongly (it decodes compressed TIFFs through libtiff already): samples wider than 8 bits stored in
    planes (16-bit RGB came out as the left half of each row, each pixel twice), and an image turned a quarter by its
    Orientation tag (5-8) in a mode Pillow reads by mapping the file (L, P, RGBA, CMYK, 16-bit grey: the stored rows
    read at the turned width, a landscape scramble of a portrait photo)."""
    saved = Image.MAX_IMAGE_PIXELS, TiffImagePlugin.READ_LIBTIFF
    tags = tiff_tags(path) or {}
    Image.MAX_IMAGE_PIXELS = None
    TiffImagePlugin.READ_LIBTIFF = (tags.get("planar") == 2 and tags.get("bits", 8) > 8) or (
        tags.get("orientation") in QUARTER_TURNS)
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS, TiffImagePlugin.READ_LIBTIFF = saved


def _grey_8bit(img: Image.Image, white_is_zero: bool = False) -> Image.Image:
    """A 16-bit greyscale image as 8-bit L (the high byte), LA where the file names a transparent grey level;
    ``white_is_zero`` (a TIFF's WhiteIsZero, which Pillow 13.0 honours at 8 bits and not at 16) inverted."""
    samples = np.asarray(img).astype(np.uint16)
    high = (samples >> 8).astype(np.uint8)
    grey = Image.fromarray(255 - high if white_is_zero else high, "L")
    grey.info = {k: v for k, v in img.info.items() if k == "icc_profile"}
    if isinstance(img.info.get("transparency"), int):
        grey.putalpha(Image.fromarray(np.where(samples == img.info["transparency"], 0, 255).astype(np.uint8), "L"))
    return grey


# The mode of the colour part (alpha apart) that an ICC profile applies to
_COLOUR_MODE = {"RGB": "RGB", "RGBA": "RGB", "RGBa": "RGB", "RGBX": "RGB", "P": "RGB", "PA": "RGB",
                "YCbCr": "RGB", "HSV": "RGB", "LAB": "LAB", "CMYK": "CMYK", "L": "L", "LA": "L", "1": "L"}


def _to_rgb(img: Image.Image, path: Path) -> Image.Image:
    """``img`` in sRGB (through its ICC profile when it has one) with any transparency composited onto white."""
    if img.mode == "La":  # premultiplied: Pillow converts it only to LA
        img = img.convert("LA")
    if img.mode not in _COLOUR_MODE:
        raise InputError(f"unsupported image mode {img.mode!r} in {path}: expected RGB, 8-bit greyscale or "
                         "an image with transparency")
    see_through = img.mode in ("RGBA", "RGBa", "LA", "PA") or (
        img.mode in ("P", "L", "RGB") and "transparency" in img.info)
    alpha = img.convert("RGBA").getchannel("A") if see_through else None
    colour = img if img.mode == _COLOUR_MODE[img.mode] else img.convert(_COLOUR_MODE[img.mode])
    rgb = _to_srgb(colour, img.info.get("icc_profile"))
    if alpha is None:
        return rgb
    rgb.putalpha(alpha)
    return Image.alpha_composite(Image.new("RGBA", img.size, (255, 255, 255, 255)), rgb).convert("RGB")


def _to_srgb(img: Image.Image, icc: bytes | None) -> Image.Image:
    """RGB, L, LAB or CMYK ``img`` -> sRGB through its ICC profile; Pillow's conversion without one (or when
    the profile cannot be read or does not fit the image's colour space)."""
    if icc:
        from PIL import ImageCms

        try:
            profile = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            return ImageCms.profileToProfile(img, profile, ImageCms.createProfile("sRGB"), outputMode="RGB")
        except (OSError, ValueError, TypeError, ImageCms.PyCMSError):
            pass
    return img.convert("RGB")


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


# An aspect change beyond which predict says the picture was stretched (a 4:3 photo on a 518x686 file is 1.01;
# a portrait phone photo on it 1.77, a 16:9 video frame 1.34)
STRETCH_NOTED = 1.25
ASPECTS = ("1:1", "4:3", "3:4", "3:2", "2:3", "16:9", "9:16", "2:1", "1:2")


def stretch(size_wh: tuple[int, int], size_hw: tuple[int, int]) -> float:
    """How far stretching a (W, H) picture to an (H, W) input changes its aspect: 1 for not at all, else the factor."""
    ratio = (size_wh[0] / size_wh[1]) / (size_hw[1] / size_hw[0])
    return max(ratio, 1 / ratio)


def stretch_note(size_wh: tuple[int, int], size_hw: tuple[int, int], what: str, up_to: bool = False,
                 exported: bool = True, prompt_hw: tuple[int, int] | None = None) -> str:
    """A line saying ``what`` ('the photo'; with ``up_to``, several of which ``size_wh`` is stretched most) was
    stretched to the file's aspect, and what keeps the aspect: --letterbox, or (for a file depthport ``exported``)
    a file exported at the photo's aspect; "" within ``STRETCH_NOTED``. A prompted file (its prompt ``prompt_hw``)
    takes no --letterbox (its prompt would not line up), and a file for a photo of the other orientation needs the
    prompt turned too (--prompt-size)."""
    factor = stretch(size_wh, size_hw)
    if factor <= STRETCH_NOTED:
        return ""
    line = f"{what} stretched {'up to ' * up_to}{factor:.2f}x to the file's aspect ({size_hw[1]}x{size_hw[0]}): "
    letterbox = "" if prompt_hw else "--letterbox keeps the aspect, or "
    if not exported:  # a file made elsewhere: depthport's export options do not apply to it
        return line + ("--letterbox keeps the aspect" if letterbox else "a file made for the photo's aspect keeps it")

    def off(aspect: str) -> float:
        w, h = aspect.split(":")
        return abs(math.log(size_wh[0] / size_wh[1] * int(h) / int(w)))

    aspect = min(ASPECTS, key=off)
    if off(aspect) > math.log(STRETCH_NOTED):  # a panorama: its own ratio
        ratio = size_wh[0] / size_wh[1]
        aspect = f"{round(ratio, 1):g}:1" if ratio >= 1 else f"1:{round(1 / ratio, 1):g}"
    turn = ""
    if prompt_hw and (size_wh[1] > size_wh[0]) != (prompt_hw[0] > prompt_hw[1]):
        turn = f" --prompt-size {prompt_hw[1]}x{prompt_hw[0]}"
    return line + f"{letterbox}export a file for it (--long-side {max(size_hw)} --aspect {aspect}{turn})"


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
