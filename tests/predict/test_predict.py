"""`depthport predict` as image tools do it: the photo as a viewer shows it (EXIF orientation, colour profile,
colour forms), depth at the photo's size (bicubic, as transformers resizes it), and many inputs (a folder, a glob
pattern, a video) with the model loaded once, bad inputs skipped and Ctrl-C leaving only whole outputs.

Everything runs on the session's tiny LiteRT export (56x70) and images and videos made here."""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import weakref
import zlib
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import av
import numpy as np
import pytest
import torch
from PIL import Image

from depthport.atomic import atomic_paths, sigint_deferred
from depthport.cli import main
from depthport.core.images import folder_set
from depthport.errors import InputError
from depthport.predict import Predictor, write_depth
from depthport.predict_inputs import open_inputs
from depthport.preprocess import FOCAL_KEY, TURNED_KEY, letterbox_box, load_image
from depthport.quiet import native_stderr_muted
from depthport.spec import CANONICAL, METRES, output_units

from helpers import TINY_HW, swapped_profile

ENTRY_CHILD = "import sys\nfrom depthport.cli import entry\nsys.argv[0] = 'depthport'\nentry()"
# EXIF orientation tag -> how the stored pixels are turned to show them (EXIF 2.32, tag 0x0112)
SHOWN = {1: None, 2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
         4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270,
         7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_90}


def photo(h: int = 40, w: int = 60, seed: int = 0) -> Image.Image:
    """A smooth, non-square RGB picture (random blobs), so that depth differs across it."""
    coarse = torch.rand(1, 3, max(2, h // 8), max(2, w // 8), generator=torch.Generator().manual_seed(seed))
    fine = torch.nn.functional.interpolate(coarse, size=(h, w), mode="bilinear", align_corners=False)
    return Image.fromarray((fine[0].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8))


def ok(capsys, argv: list[str]) -> tuple[str, str]:
    capsys.readouterr()
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    return captured.out, captured.err


def bicubic(depth: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """transformers' post_process_depth_estimation resize, written out here."""
    x = torch.from_numpy(depth.astype(np.float32))[None, None]
    return torch.nn.functional.interpolate(x, size=hw, mode="bicubic", align_corners=False)[0, 0].numpy()


def single(capsys, model, image: Path, out: Path, *extra) -> np.ndarray:
    """The depth of one image through the command line (.npy beside the PNG); checks the PNG has its size (a
    metric model's colour-bar legend is drawn inside it)."""
    ok(capsys, ["predict", model, image, "-o", out.with_suffix(".png"), "--npy", out.with_suffix(".npy"), *extra])
    depth = np.load(out.with_suffix(".npy"))
    width, height = Image.open(out.with_suffix(".png")).size
    assert (height, width) == depth.shape
    return depth


# ------------------------------------------------------------------------------------------------ the photo
@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_exif_orientation_gives_the_displayed_photo(tiny_tflite, tmp_path, capsys, orientation):
    """A 60x40 photo stored with each orientation tag: depth has the displayed shape and is the depth of the photo
    already turned (the same decoded pixels, turned here from the EXIF table, saved losslessly)."""
    stored = tmp_path / "stored.jpg"
    exif = Image.Exif()
    exif[0x0112] = orientation
    photo().save(stored, exif=exif, quality=95)
    with Image.open(stored) as raw:
        assert raw.getexif()[0x0112] == orientation
        pixels = Image.fromarray(np.asarray(raw.convert("RGB")))  # the decoded pixels, without the EXIF
    shown = pixels.transpose(SHOWN[orientation]) if SHOWN[orientation] is not None else pixels
    shown.save(tmp_path / "shown.png")
    assert 0x0112 not in Image.open(tmp_path / "shown.png").getexif()
    depth = single(capsys, tiny_tflite, stored, tmp_path / "tagged")
    expected = single(capsys, tiny_tflite, tmp_path / "shown.png", tmp_path / "turned")
    assert depth.shape == (shown.height, shown.width) == ((60, 40) if orientation >= 5 else (40, 60))
    assert np.array_equal(depth, expected)


def test_verification_folders_read_images_as_shown(tmp_path):
    """`--images DIR` (core.images.folder_set) reads through load_image: EXIF orientation applied."""
    exif = Image.Exif()
    exif[0x0112] = 6
    photo().save(tmp_path / "turned.png", exif=exif)
    [(name, image)] = folder_set(tmp_path)
    assert name == "turned.png" and image.size == (40, 60)
    assert np.array_equal(np.asarray(image), np.asarray(photo().transpose(Image.Transpose.ROTATE_270)))


def test_embedded_icc_profile_is_converted_to_srgb(tmp_path):
    colours = np.array([[[200, 30, 60], [20, 120, 240]]], np.uint8).repeat(4, axis=0)
    Image.fromarray(colours).save(tmp_path / "swapped.png", icc_profile=swapped_profile())
    shown = np.asarray(load_image(tmp_path / "swapped.png")).astype(int)
    assert np.abs(shown - colours[..., ::-1]).max() <= 1  # red and blue exchanged, as the profile says
    Image.fromarray(colours).save(tmp_path / "broken.png", icc_profile=b"not a profile" * 20)
    assert np.array_equal(np.asarray(load_image(tmp_path / "broken.png")), colours)  # ignored, as viewers do


def png16(path: Path, rgb16: np.ndarray) -> None:
    """A 16-bit RGB PNG (Pillow writes RGB only at 8 bits)."""
    h, w, _ = rgb16.shape
    rows = b"".join(b"\0" + row.astype(">u2").tobytes() for row in rgb16)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def test_colour_forms_become_the_rgb_a_viewer_shows(tmp_path):
    rgb = np.asarray(photo(24, 30))
    grey = rgb[..., 0]
    Image.fromarray(grey).save(tmp_path / "grey.png")
    assert np.array_equal(np.asarray(load_image(tmp_path / "grey.png")), np.dstack([grey] * 3))
    Image.fromarray(grey > 128).save(tmp_path / "bits.png")
    assert Image.open(tmp_path / "bits.png").mode == "1"
    assert np.array_equal(np.asarray(load_image(tmp_path / "bits.png")), np.dstack([(grey > 128) * 255] * 3))
    palette = Image.fromarray(rgb).quantize(8)
    palette.save(tmp_path / "palette.png")
    assert np.array_equal(np.asarray(load_image(tmp_path / "palette.png")), np.asarray(palette.convert("RGB")))
    cmyk = Image.fromarray(rgb).convert("CMYK")
    cmyk.save(tmp_path / "cmyk.tif")
    assert Image.open(tmp_path / "cmyk.tif").mode == "CMYK"
    assert np.array_equal(np.asarray(load_image(tmp_path / "cmyk.tif")), np.asarray(cmyk.convert("RGB")))
    png16(tmp_path / "deep.png", rgb.astype(np.uint16) * 257 + 3)  # 16 bits per channel: read at 8 bits
    assert np.array_equal(np.asarray(load_image(tmp_path / "deep.png")), rgb)


def test_tiffs_a_scanner_or_raw_converter_writes_are_read_as_shown_or_named_for_what_they_are(tmp_path, capfd):
    """16-bit RGB stored in planes (one plane per colour, uncompressed): Pillow's own reader gave each row's left
    half, each pixel twice; libtiff decodes it. Floating-point RGB (a raw converter's or an HDR merge's 32-bit
    export), which Pillow does not decode, said 'damaged, cut short, or another kind of file named .tif'; now what
    it is. 16-bit greyscale stored white-is-zero came out as its negative. A signed 16-bit greyscale image was
    called 32-bit. An uncompressed greyscale, 16-bit greyscale or RGBA TIFF turned a quarter by its Orientation tag
    came out landscape, its rows read at the turned width."""
    import tifffile

    rgb = np.asarray(photo(24, 30))
    deep = rgb.astype(np.uint16) * 257 + 3  # read at 8 bits: the high byte
    for order in ("<", ">"):
        planes = tmp_path / f"planes{order == '>'}.tif"
        tifffile.imwrite(planes, deep.transpose(2, 0, 1), photometric="rgb", planarconfig="separate", byteorder=order)
        assert np.array_equal(np.asarray(load_image(planes)), rgb)
    for bits, dtype in ((32, np.float32), (16, np.float16)):
        tifffile.imwrite(tmp_path / "float.tif", (rgb / 255).astype(dtype), photometric="rgb")
        with pytest.raises(InputError, match=re.escape(
                f"float.tif: a TIFF of {bits}-bit floating-point RGB (3 samples per pixel), a form Pillow does not "
                "decode: save it as an 8- or 16-bit RGB TIFF, a PNG or a JPEG first")):
            load_image(tmp_path / "float.tif")
    tifffile.imwrite(tmp_path / "float.tif", (rgb / 255).astype(np.float32), photometric="rgb", bigtiff=True)
    with pytest.raises(InputError, match="a TIFF of 32-bit floating-point RGB"):
        load_image(tmp_path / "float.tif")
    (tmp_path / "cut.tif").write_bytes((tmp_path / "planesFalse.tif").read_bytes()[:12])  # its directory cut off
    with pytest.raises(InputError, match="damaged, cut short, or another kind of file named .tif"):
        load_image(tmp_path / "cut.tif")
    (tmp_path / "bare.tif").write_bytes(b"II*\x00\x08\x00\x00\x00\x01\x00\x00\x01\x03\x00\x01\x00\x00\x00"
                                        b"\x10\x00\x00\x00\x00\x00\x00\x00")  # a directory without the image's data
    with pytest.raises(InputError, match="bare.tif: not a .tif image Pillow can read: damaged"):
        load_image(tmp_path / "bare.tif")
    assert "tifffile" not in capfd.readouterr().err  # its warnings on the bare directory are not printed
    grey = rgb[..., 1]  # WhiteIsZero (an X-ray's or a scanner's): Pillow inverts it at 8 bits, not at 16
    tifffile.imwrite(tmp_path / "white_is_zero.tif", 65535 - grey.astype(np.uint16) * 257, photometric="miniswhite")
    assert np.array_equal(np.asarray(load_image(tmp_path / "white_is_zero.tif")), np.dstack([grey] * 3))
    tifffile.imwrite(tmp_path / "signed.tif", rgb[..., 0].astype(np.int16))
    with pytest.raises(InputError, match="mode 'I' in .*: a 32-bit or signed integer greyscale image has no defined"):
        load_image(tmp_path / "signed.tif")
    # Turned a quarter by its Orientation tag, in modes Pillow maps from the file: the portrait photo, not rows read
    # at the turned width
    for name, stored, shown in (("grey", grey, np.dstack([grey] * 3)), ("deep-grey", grey.astype(np.uint16) * 257,
                                np.dstack([grey] * 3)), ("rgba", np.dstack([rgb, np.full_like(grey, 255)]), rgb)):
        Image.fromarray(stored).save(tmp_path / f"{name}.tif", tiffinfo={0x0112: 6})
        assert np.array_equal(np.asarray(load_image(tmp_path / f"{name}.tif")), np.rot90(shown, -1)), name


def test_photos_up_to_268_megapixels_are_read_and_larger_ones_refused_from_the_header(tmp_path, monkeypatch):
    """Pillow's decompression-bomb guard (a warning above 89 MP, an error above 179) would refuse a phone's 200-MP
    photo: depthport applies its own limit, preprocess.MAX_PIXELS (2**28), scaled down here to a tiny image."""
    from depthport import preprocess

    Image.new("RGB", (20, 10), (1, 2, 3)).save(tmp_path / "photo.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 99)  # Pillow alone: 200 pixels is over 2x its limit, an error
    with pytest.raises(Image.DecompressionBombError):
        Image.open(tmp_path / "photo.png")
    assert load_image(tmp_path / "photo.png").size == (20, 10) and Image.MAX_IMAGE_PIXELS == 99
    monkeypatch.setattr(preprocess, "MAX_PIXELS", 199)
    with pytest.raises(InputError, match=r"photo\.png: 20x10 is 0 megapixels, above the 0 depthport reads; downscale"):
        load_image(tmp_path / "photo.png")
    assert preprocess.MAX_PIXELS == 199 and 16320 * 12240 < 2**28  # a 200-MP phone photo is within the real limit


def test_colourising_in_bands_gives_the_whole_image_pass(monkeypatch):
    """visualize.colorize works through CHUNK_PIXELS at a time (a 200-MP depth map in ~5 GB, not ~20): every band
    size gives the same picture, percentile-scaled or between given bounds."""
    from depthport import visualize

    depth = np.random.default_rng(3).normal(5.0, 2.0, (37, 23)).astype(np.float32)
    whole = [np.asarray(visualize.colorize(depth, **bounds)) for bounds in ({}, {"lo": 4.0, "hi": 6.0})]
    for chunk in (1, 23, 50, 23 * 37):
        monkeypatch.setattr(visualize, "CHUNK_PIXELS", chunk)
        assert [np.asarray(visualize.colorize(depth, **bounds)).tolist() for bounds in ({}, {"lo": 4.0, "hi": 6.0})] \
            == [picture.tolist() for picture in whole]
    assert len({tuple(px) for px in whole[0].reshape(-1, 3)}) > 50  # a spread of colours, not one


@pytest.mark.parametrize("cmap", ["Spectral_r", "viridis", "gray", "turbo"])
def test_colourising_by_table_gives_matplotlibs_colours_byte_for_byte(cmap):
    """colorize looks each value up in a uint8 table instead of asking matplotlib for float RGBA per pixel; every
    value gives the colour matplotlib's colour map gives it, rounded as before: either bound, each step's edges
    (k/N), beyond the bounds, infinities and NaN."""
    from matplotlib import colormaps

    from depthport import visualize

    rng = np.random.default_rng(5)
    values = np.concatenate([rng.normal(0.5, 0.4, 4000), np.arange(257) / 256, np.nextafter(np.arange(257) / 256, 2),
                             np.nextafter(np.arange(257) / 256, -1), [np.inf, -np.inf, np.nan, 1e30, -1e30]])
    depth = np.resize(values, (61, 80))
    for bounds in ({"lo": 0.0, "hi": 1.0}, {"lo": 0.25, "hi": 0.75}, {}):
        lo, hi = (bounds["lo"], bounds["hi"]) if bounds else visualize.depth_range(depth)
        scaled = np.clip((depth.astype(np.float64) - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
        expected = (colormaps[cmap](scaled)[..., :3] * 255).round().astype(np.uint8)  # matplotlib per pixel
        assert np.array_equal(np.asarray(visualize.colorize(depth, cmap, **bounds)), expected)

def test_depth_that_is_nan_or_infinite_in_places_is_said_and_the_rest_still_shows(tmp_path, capsys):
    """Where a file's arithmetic overflows (FP16), its depth holds NaN or infinities. The picture's span comes from
    the finite values (NaN made the whole PNG black, an infinity one colour), the line gives the finite range and
    counts the rest, and a folder's summary names the images. The file here takes the log of the normalised
    photo's channel mean: NaN where that is negative, -inf where it is 0."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x", "axes"], ["mean"], keepdims=0), helper.make_node("Log", ["mean"], ["y"])],
        "log_of_mean", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 28, 28])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [1])])
    model = tmp_path / "overflows.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), model)
    (tmp_path / "photos").mkdir()
    photo(56, 56, seed=1).save(tmp_path / "photos" / "a.png")
    photo(56, 56, seed=2).save(tmp_path / "photos" / "b.png")
    out, _ = ok(capsys, ["predict", model, tmp_path / "photos" / "a.png", "-o", tmp_path / "a.png", "--npy"])
    depth = np.load(tmp_path / "a.npy")
    bad, finite = ~np.isfinite(depth), depth[np.isfinite(depth)]
    assert 0 < bad.sum() < depth.size - 100
    assert f"range {finite.min():.4g}..{finite.max():.4g}; {bad.sum()} of its {depth.size} values are NaN or " \
           "infinite" in out
    picture = np.asarray(Image.open(tmp_path / "a.png"))
    assert (picture[np.isnan(depth)] == 0).all()  # NaN: the colour map's colour for it (black)
    assert len({tuple(px) for px in picture[np.isfinite(depth)]}) > 20  # the rest as a picture of its own span
    out, _ = ok(capsys, ["predict", model, tmp_path / "photos", "-o", tmp_path / "many"])
    assert "; 2 images (a.png, b.png) with depth NaN or infinite in places" in out

def test_a_multi_frame_file_gives_its_first_frame(tmp_path):
    frames = [Image.new("RGB", (20, 10), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=100)
    assert getattr(Image.open(tmp_path / "anim.gif"), "n_frames", 1) == 2
    assert load_image(tmp_path / "anim.gif").getpixel((5, 5)) == (255, 0, 0)


def test_a_folder_takes_the_names_browsers_and_cameras_give_jpegs(tmp_path):
    """WhatsApp and browsers save JPEGs as .jfif, stereo cameras as .mpo: a folder reads them like .jpg."""
    photo = Image.fromarray(np.full((20, 30, 3), 120, np.uint8))
    for name in ("a.jfif", "b.JPE", "c.mpo", "d.jp2", "e.pnm"):
        photo.save(tmp_path / name, format={"jfif": "JPEG", "jpe": "JPEG", "mpo": "JPEG", "jp2": "JPEG2000",
                                            "pnm": "PPM"}[name.rsplit(".", 1)[1].lower()])
    (tmp_path / "notes.txt").write_text("not an image")
    images = folder_set(tmp_path)
    assert [name for name, _ in images] == ["a.jfif", "b.JPE", "c.mpo", "d.jp2", "e.pnm"]
    assert all(img.size == (30, 20) and img.mode == "RGB" for _, img in images)


def test_an_animation_gives_its_first_frames_depth_and_says_so(tiny_tflite, tmp_path, capsys):
    """An animated GIF, PNG or WebP: the depth of its first frame, as a viewer's still shows it, and the output
    says the file had more (it said nothing). A one-frame GIF and an MPO (a camera's second image: a gain map, a
    depth map) are not animations."""
    from depthport.preprocess import FRAMES_KEY, load_image

    frames, photos = [photo(40, 60, seed) for seed in range(3)], tmp_path / "photos"
    photos.mkdir()
    for name, extra in {"anim.gif": {}, "anim.png": {}, "anim.webp": {"lossless": True}}.items():
        frames[0].save(photos / name, save_all=True, append_images=frames[1:], duration=100, **extra)
        with Image.open(photos / name) as first:
            first.convert("RGB").save(tmp_path / f"first-{name}.png")
        depth = single(capsys, tiny_tflite, photos / name, tmp_path / f"d-{name}")
        np.testing.assert_array_equal(depth, single(capsys, tiny_tflite, tmp_path / f"first-{name}.png",
                                                    tmp_path / f"f-{name}"))
    out, _ = ok(capsys, ["predict", tiny_tflite, photos / "anim.webp", "-o", tmp_path / "w.png"])
    assert "; the depth of the first of its 3 frames (an animated image)" in out
    frames[0].save(photos / "still.gif")
    frames[0].save(tmp_path / "camera.mpo", format="MPO", save_all=True, append_images=frames[1:2])
    assert FRAMES_KEY not in load_image(photos / "still.gif").info | load_image(tmp_path / "camera.mpo").info
    out, _ = ok(capsys, ["predict", tiny_tflite, photos / "still.gif", "-o", tmp_path / "s.png"])
    assert "animated" not in out
    out, _ = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out"])
    assert "4 images, 0 skipped" in out
    assert "; 3 animated images (anim.gif, anim.png, anim.webp): the depth of each one's first frame" in out


def test_a_multi_page_tiff_gives_its_first_pages_depth_and_says_so(tiny_tflite, tmp_path, capsys):
    """A TIFF of several pages (a scanner's, a microscope's stack): the depth of its first page, said as an animation's
    first frame is (it said nothing). A page's reduced-resolution preview is not a page; a TIFF whose later
    directories do not read still gives its first page, without a note."""
    import tifffile

    from depthport.preprocess import FRAMES_KEY, Frames, load_image

    pages, scans = [photo(40, 60, seed) for seed in range(3)], tmp_path / "scans"
    scans.mkdir()
    pages[0].save(scans / "pages.tif", save_all=True, append_images=pages[1:])
    pages[0].save(tmp_path / "first.png")
    with tifffile.TiffWriter(scans / "preview.tif") as tif:
        tif.write(np.asarray(pages[0]), photometric="rgb")
        tif.write(np.asarray(pages[1])[::4, ::4], photometric="rgb", subfiletype=1)  # reduced-resolution
    stored = bytearray((scans / "pages.tif").read_bytes())
    first = struct.unpack("<I", stored[4:8])[0]
    after = first + 2 + 12 * struct.unpack("<H", stored[first:first + 2])[0]
    stored[after:after + 4] = struct.pack("<I", len(stored) + 5000)  # the second page's directory: past the end
    (tmp_path / "cut.tif").write_bytes(stored)
    assert load_image(scans / "pages.tif").info[FRAMES_KEY] == Frames(3, "page", "multi-page TIFF")
    for name in ("scans/pages.tif", "scans/preview.tif", "cut.tif"):
        depth = single(capsys, tiny_tflite, tmp_path / name, tmp_path / f"d-{Path(name).stem}")
        np.testing.assert_array_equal(depth, single(capsys, tiny_tflite, tmp_path / "first.png", tmp_path / "f"))
    assert FRAMES_KEY not in load_image(scans / "preview.tif").info | load_image(tmp_path / "cut.tif").info
    out, _ = ok(capsys, ["predict", tiny_tflite, scans / "pages.tif", "-o", tmp_path / "p.png"])
    assert "; the depth of the first of its 3 pages (a multi-page TIFF)" in out
    pages[0].save(scans / "anim.gif", save_all=True, append_images=pages[1:], duration=100)
    out, _ = ok(capsys, ["predict", tiny_tflite, scans, "-o", tmp_path / "out"])
    assert ("3 images, 0 skipped" in out and "; 1 animated image (anim.gif): the depth of its first frame; 1 "
            "multi-page TIFF (pages.tif): the depth of its first page" in out)


def test_a_folder_is_read_as_far_as_pillow_reads_and_hidden_files_are_passed_over(tmp_path):
    """Targa, PCX, SGI and icon files are read like any photo; macOS's ``._NAME.jpg`` metadata twins (copied
    cards and drives) and other dot-files are passed over as a shell's ``*`` passes them, not reported as bad."""
    from depthport.core.images import COMMON_SUFFIXES, image_suffixes, looked_for

    photo = Image.fromarray(np.full((20, 30, 3), 120, np.uint8))
    for name in ("a.tga", "b.pcx", "c.sgi", "d.ico"):
        photo.save(tmp_path / name)
    (tmp_path / "._a.jpg").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ")
    photo.save(tmp_path / ".thumbnail.png")
    assert [name for name, _ in folder_set(tmp_path)] == ["a.tga", "b.pcx", "c.sgi", "d.ico"]
    suffixes = image_suffixes()
    assert {".psd", ".qoi", ".heic", ".heif", ".hif", ".jfif", ".mpo"} <= set(suffixes)
    assert not {".mpg", ".eps", ".h5", ".wmf", ".pdf"} & set(suffixes)  # a video, a document; stubs; save-only
    assert looked_for().startswith("looked for .png, .jpg, .jpeg, .heic")
    assert f" and {len(suffixes) - len(COMMON_SUFFIXES)} more suffixes" in looked_for() and len(suffixes) > 40


def test_a_file_without_its_report_says_what_was_assumed(tiny_tflite, tmp_path, capsys):
    """A file moved away from its export's report.json still predicts, and says in one line that its
    preprocessing and units were assumed; beside its report it does not."""
    bare, photo = tmp_path / "bare" / "m.tflite", tmp_path / "photo.png"
    bare.parent.mkdir()
    bare.write_bytes(Path(tiny_tflite).read_bytes())
    Image.fromarray(np.full((30, 40, 3), 90, np.uint8)).save(photo)
    assert main(["predict", str(bare), str(photo), "-o", str(tmp_path / "a.png")]) == 0
    err = capsys.readouterr().err
    assert f"no depthport report.json beside {bare}" in err and "output unitless" in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1
    exported = tmp_path / "exported"
    assert main(["export", "da2-tiny", "--weights", "random", "--size", "56x70", "--targets", "litert-fp32", "--skip",
                 "ledger,verify,bench,card", "--out", str(exported)]) == 0
    capsys.readouterr()
    assert main(["predict", str(exported / "da2_tiny_fp32.tflite"), str(photo), "-o", str(tmp_path / "b.png")]) == 0
    assert "report.json" not in capsys.readouterr().err

# ------------------------------------------------------------------------------------------------ the size
def test_one_image_into_a_folder_takes_the_images_name(tiny_tflite, tmp_path, capsys):
    """-o or --npy naming a folder (one that exists, or a path ending in '/') puts NAME.png or NAME.npy in it, as cp
    puts a file into a folder; --npy alone goes beside the PNG; a file name is still the file."""
    image = tmp_path / "IMG_0001.jpg"
    photo().save(image)
    depth = single(capsys, tiny_tflite, image, tmp_path / "one")
    (tmp_path / "there").mkdir()
    out, _ = ok(capsys, ["predict", tiny_tflite, image, "-o", tmp_path / "there", "--npy"])
    assert out.startswith(f"wrote {tmp_path / 'there' / 'IMG_0001.png'} and {tmp_path / 'there' / 'IMG_0001.npy'}")
    ok(capsys, ["predict", tiny_tflite, image, "-o", f"{tmp_path / 'new'}/", "--npy", f"{tmp_path / 'npy'}/"])
    ok(capsys, ["predict", tiny_tflite, image, "-o", tmp_path / "named.png", "--npy", tmp_path / "there"])
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file() and p != image) == [
        "named.png", "new/IMG_0001.png", "npy/IMG_0001.npy", "one.npy", "one.png", "there/IMG_0001.npy",
        "there/IMG_0001.png"]
    for npy in ("npy/IMG_0001.npy", "there/IMG_0001.npy"):
        assert np.array_equal(np.load(tmp_path / npy), depth)
    for png in ("named.png", "new/IMG_0001.png", "there/IMG_0001.png"):
        assert Image.open(tmp_path / png).tobytes() == Image.open(tmp_path / "one.png").tobytes()
    for option, given, want in (("-o", "depth", f"-o {tmp_path / 'depth'}: the depth is written as .png (a colourised "
                                 f"depth image); give -o NAME.png, or a folder to put IMG_0001.png in "
                                 f"({tmp_path / 'depth'}/)"),
                                ("--npy", "d.txt", f"give --npy NAME.npy, or a folder to put IMG_0001.npy in "
                                 f"({tmp_path / 'd'}/)")):
        capsys.readouterr()  # a name that is neither a .png/.npy nor a folder: both ways said, as for a video
        assert main(["predict", str(tiny_tflite), str(image), "-o", str(tmp_path / "x.png"), option,
                     str(tmp_path / given)]) == 2
        assert want in capsys.readouterr().err and not (tmp_path / given).exists()


def test_a_photo_stretched_to_another_aspect_is_said_with_what_keeps_its_aspect(tiny_tflite, tmp_path, capsys):
    """A fixed-shape file stretches every picture to its aspect: a portrait phone photo on a landscape file (1.25
    here, 4:3 as the default exports) by far more than a photo of its own aspect. Beyond preprocess.STRETCH_NOTED
    the line says how far and what keeps the aspect (--letterbox, or a file exported for it); a folder's summary
    names the images, a video's its frames. A photo of about the file's aspect, and --letterbox, say nothing."""
    h, w = TINY_HW
    (tmp_path / "export").mkdir()  # an export's folder: the file beside the report that names its model
    tiny_tflite = Path(shutil.copy(tiny_tflite, tmp_path / "export"))
    (tmp_path / "export" / "report.json").write_text(json.dumps({"model": "da2-tiny"}))
    photo(60, 45).save(tmp_path / "portrait.png")  # 3:4 on a 5:4 file: 1.67x
    photo(48, 60).save(tmp_path / "near.png")  # 5:4
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "portrait.png", "-o", tmp_path / "p.png"])
    assert out.rstrip().endswith(f"; the photo stretched 1.67x to the file's aspect ({w}x{h}): --letterbox keeps the "
                                 f"aspect, or export a file for it (--long-side {max(h, w)} --aspect 3:4)")
    for extra, name in ((["--letterbox"], "portrait.png"), ([], "near.png")):
        out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / name, "-o", tmp_path / "q.png", *extra])
        assert "x to the file's aspect" not in out
    folder = tmp_path / "photos"
    folder.mkdir()
    for name, size in (("a.png", (60, 45)), ("b.png", (48, 60)), ("c.png", (30, 120))):  # c: 4:1, 3.2x
        photo(*size).save(folder / name)
    out, _ = ok(capsys, ["predict", tiny_tflite, folder, "-o", tmp_path / "many"])
    assert f"; 2 images (a.png, c.png) stretched up to 3.20x to the file's aspect ({w}x{h}): --letterbox keeps the " \
           f"aspect, or export a file for it (--long-side {max(h, w)} --aspect 4:1); wrote" in out
    make_video(tmp_path / "clip.mp4", 2, hw=(36, 64))  # 16:9: 1.42x
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "clip.mp4", "-o", tmp_path / "d.mp4"])
    assert "; its frames stretched 1.42x to the file's aspect" in out and "--aspect 16:9); wrote" in out

@pytest.mark.parametrize("letterbox", [False, True])
def test_depth_is_at_the_photos_size_unless_model_size(tiny_tflite, tmp_path, capsys, letterbox):
    """Default: the model's depth resized to the photo (bicubic, align_corners=False; the letterbox's content
    cropped first); --model-size: the model's shape. The PNG has the .npy's size either way."""
    photo(30, 60).save(tmp_path / "p.png")
    extra = ["--letterbox"] if letterbox else []
    depth = single(capsys, tiny_tflite, tmp_path / "p.png", tmp_path / "photo", *extra)
    model = single(capsys, tiny_tflite, tmp_path / "p.png", tmp_path / "model", "--model-size", *extra)
    assert depth.shape == (30, 60) and model.shape == TINY_HW
    if letterbox:
        top, left, h, w = letterbox_box((30, 60), TINY_HW)
        assert (top, left, h, w) == (10, 0, 35, 70)  # the bars are cut off, then 35x70 resized to 30x60
        model = model[top:top + h, left:left + w]
    np.testing.assert_allclose(depth, bicubic(model, (30, 60)), rtol=0, atol=1e-6)


def metric_file(tiny_tflite, tmp_path, meaning: str) -> Path:
    """The tiny file with a report.json saying its output is metres, or canonical depth (times focal_px / 300)."""
    folder = tmp_path / "export"
    folder.mkdir()
    model = folder / "metric.tflite"
    model.write_bytes(Path(tiny_tflite).read_bytes())
    units = output_units(meaning, 20.0) if meaning == METRES else output_units(meaning, focal_reference=300.0)
    (folder / "report.json").write_text(json.dumps({"output_units": units}))
    return model


@pytest.mark.parametrize("meaning", [METRES, CANONICAL])
def test_metric_depth_stays_in_metres_at_the_photos_size(tiny_tflite, tmp_path, capsys, meaning):
    """Resizing does not rescale values: the photo-size metres are the bicubic resize of the model-size metres,
    which are the raw output (times focal x scale / 300 for canonical depth, at the input size)."""
    model = metric_file(tiny_tflite, tmp_path, meaning)
    photo(45, 70).save(tmp_path / "p.png")
    focal = ["--focal", "700"] if meaning == CANONICAL else []
    depth = single(capsys, model, tmp_path / "p.png", tmp_path / "photo", *focal)
    at_input = single(capsys, model, tmp_path / "p.png", tmp_path / "model", "--model-size", *focal)
    with native_stderr_muted():
        raw = Predictor(tiny_tflite, model_size=True).depth(load_image(tmp_path / "p.png"))
    factor = 700 * (70 / 70 + 56 / 45) / 2 / 300 if meaning == CANONICAL else 1.0
    np.testing.assert_allclose(at_input, raw * factor, rtol=1e-6)
    np.testing.assert_allclose(depth, bicubic(at_input, (45, 70)), rtol=0, atol=1e-6)


def test_a_metric_depth_too_small_for_a_legend_is_written_without_one(tiny_tflite, tmp_path, capsys):
    """A metric model's depth of a photo 5 pixels tall or less raised a traceback in the legend's drawing (exit 1)
    and ended a folder mid-way; now such a picture has no legend (the line gives the range in metres), a short one
    gets fewer ticks, and a large one keeps its legend."""
    from depthport.visualize import colorize, depth_range

    model, photos = metric_file(tiny_tflite, tmp_path, METRES), tmp_path / "photos"
    photos.mkdir()
    for h, w in ((1, 1), (3, 4), (2, 100), (100, 1), (60, 90), (300, 451)):
        photo(h, w).save(photos / f"p{h}x{w}.png")
        depth = single(capsys, model, photos / f"p{h}x{w}.png", tmp_path / f"d{h}x{w}")
        lo, hi = depth_range(depth)
        plain = colorize(depth, lo=lo, hi=hi)
        with Image.open(tmp_path / f"d{h}x{w}.png") as png:
            drawn = np.asarray(png.convert("RGB"))
        assert np.array_equal(drawn, np.asarray(plain)) == (h * w < 60 * 90), (h, w)  # a legend from 60x90 up
    out, _ = ok(capsys, ["predict", model, photos, "-o", tmp_path / "out"])
    assert out.startswith("6 images, 0 skipped") and len(list((tmp_path / "out").glob("*.png"))) == 6


def test_canonical_metres_take_each_photos_focal_length_from_its_exif(tiny_tflite, tmp_path, capsys, monkeypatch):
    """A phone writes its 35 mm-equivalent focal length (EXIF FocalLengthIn35mmFilm): without --focal, a model whose
    metres need the focal length takes it from there, f35 / 43.27 mm times the photo's diagonal in pixels (so the
    EXIF orientation changes nothing), and says so. The same depth as --focal with that many pixels. A photo without
    it is refused alone and skipped in a folder, with what to pass; a video (no EXIF) needs --focal. For the one-photo
    command Pillow's decompression-bomb guard is set far below the photo: the line's focal length comes from the one
    read that lifts the guard, as a phone's 200-megapixel photo needs (depthport's MAX_PIXELS applies instead)."""
    import math

    model = metric_file(tiny_tflite, tmp_path, CANONICAL)
    exif = Image.Exif()
    exif[0x0112] = 6
    exif.get_ifd(0x8769)[0xA405] = 26  # the Exif IFD's FocalLengthIn35mmFilm, in mm
    (tmp_path / "photos").mkdir()
    photo(45, 70).save(tmp_path / "photos" / "IMG_0001.JPG", exif=exif, quality=95)
    photo(45, 70).save(tmp_path / "photos" / "screenshot.png")
    px = 26 * math.hypot(45, 70) / math.hypot(36, 24)
    with monkeypatch.context() as guarded:
        guarded.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
        out, _ = ok(capsys, ["predict", model, tmp_path / "photos" / "IMG_0001.JPG", "-o", tmp_path / "exif.png",
                             "--npy"])
    assert f" m; focal {px:.0f} px from the photo's EXIF (26 mm in 35 mm terms; --focal overrides it)" in out
    depth = np.load(tmp_path / "exif.npy")
    given = single(capsys, model, tmp_path / "photos" / "IMG_0001.JPG", tmp_path / "given", "--focal", repr(px))
    assert depth.shape == (70, 45)
    np.testing.assert_allclose(depth, given, rtol=1e-6)
    out, err = ok(capsys, ["predict", model, tmp_path / "photos", "-o", tmp_path / "many", "--npy"])
    assert "2 images, 1 skipped (screenshot.png: metric.tflite gives metres only with the camera's focal length, " \
           "and this photo's EXIF has no 35 mm-equivalent focal length (FocalLengthIn35mmFilm): pass --focal PX" in out
    assert "; metres from each photo's EXIF focal length (26 mm in 35 mm terms; --focal overrides it); " in out
    np.testing.assert_allclose(np.load(tmp_path / "many" / "IMG_0001.npy"), depth, rtol=1e-6)
    alone = tmp_path / "photos" / "screenshot.png"
    assert main(["predict", str(model), str(alone), "-o", str(tmp_path / "alone.png")]) == 2
    err = capsys.readouterr().err
    assert "EXIF has no 35 mm-equivalent focal length (FocalLengthIn35mmFilm): pass --focal PX" in err
    exif.get_ifd(0x8769)[0xA405] = 1  # a broken EXIF: metres ~26x off, taken without a word
    photo(45, 70).save(tmp_path / "broken.jpg", exif=exif)
    assert main(["predict", str(model), str(tmp_path / "broken.jpg"), "-o", str(tmp_path / "broken.png")]) == 2
    assert "and this photo's EXIF says 1 mm in 35 mm terms (FocalLengthIn35mmFilm), which no camera's lens is: pass " \
           "--focal PX" in capsys.readouterr().err
    make_video(tmp_path / "clip.mp4", 2)
    assert main(["predict", str(model), str(tmp_path / "clip.mp4"), "-o", str(tmp_path / "v.mp4")]) == 2
    assert "pass --focal PX, the focal length in pixels of clip.mp4, or --focal MMmm in 35 mm terms, as a phone's " \
           "specifications give it (26mm)" in capsys.readouterr().err


def test_focal_in_millimetres_is_taken_and_millimetres_given_as_pixels_are_refused(tiny_tflite, tmp_path, capsys):
    """A phone's focal length is known as '26 mm' (35 mm terms): --focal 26mm gives each picture's own pixels (the
    EXIF's formula), the same depth as --focal with those pixels. --focal 26 (pixels) would have made the metres ~50x
    too small without a word: a field of view wider than a camera's is refused in one line, for a photo, a folder
    (not skipped photo by photo) and a video (nothing written)."""
    import math

    model = metric_file(tiny_tflite, tmp_path, CANONICAL)
    (tmp_path / "photos").mkdir()
    photo(300, 400).save(tmp_path / "photos" / "a.png")
    photo(120, 160, seed=1).save(tmp_path / "photos" / "b.png")
    px = 26 * math.hypot(300, 400) / math.hypot(36, 24)
    np.testing.assert_allclose(single(capsys, model, tmp_path / "photos" / "a.png", tmp_path / "mm", "--focal", "26mm"),
                               single(capsys, model, tmp_path / "photos" / "a.png", tmp_path / "px", "--focal",
                                      f"{px!r}px"), rtol=1e-6)
    out, _ = ok(capsys, ["predict", model, tmp_path / "photos" / "a.png", "-o", tmp_path / "said.png", "--focal", "26mm"])
    assert out.rstrip().endswith("; focal 300 px from --focal 26mm (35 mm terms)")  # the pixels it gave: said
    out, _ = ok(capsys, ["predict", model, tmp_path / "photos", "-o", tmp_path / "many", "--npy", "--focal", "26MM"])
    assert "; focal 120-300 px from --focal 26mm (35 mm terms, by each picture's size); " in out
    out, _ = ok(capsys, ["predict", model, tmp_path / "photos", "-o", tmp_path / "px", "--focal", "300"])
    assert "focal " not in out.split("; wrote")[0]  # pixels given as such: nothing to say
    small = 26 * math.hypot(120, 160) / math.hypot(36, 24)
    np.testing.assert_allclose(np.load(tmp_path / "many" / "b.npy"),
                               single(capsys, model, tmp_path / "photos" / "b.png", tmp_path / "b", "--focal",
                                      repr(small)), rtol=1e-6)
    make_video(tmp_path / "clip.mp4", 3, hw=(240, 320))
    refused = {".png": tmp_path / "photos" / "a.png", "": tmp_path / "photos", ".mp4": tmp_path / "clip.mp4"}
    for suffix, source in refused.items():
        out = tmp_path / f"refused{suffix}"
        assert main(["predict", str(model), str(source), "-o", str(out), "--focal", "26"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "mm in 35 mm terms, a 1" in err and "write --focal 26mm" in err, err
        assert not list(tmp_path.glob("refused*")), source
        assert ("error: a.png: --focal 26 px on this 400x300 picture" in err) is (suffix == ""), err  # which photo
    assert main(["predict", str(model), str(source), "--focal", "3mm"]) == 2
    assert "--focal 3mm is 3 mm in 35 mm terms" in capsys.readouterr().err
    assert main(["predict", str(model), str(source), "--focal", "1e9"]) == 2  # a typing slip: metres ~1e6 too far
    assert ("--focal 1e+09 px on this 320x240 picture is 1.08e+08 mm in 35 mm terms, a 2.3e-05° diagonal field of "
            "view, narrower than a camera's (a phone's 26 mm main camera: 240 px here)") in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["predict", str(model), str(source), "--focal", "26 inch"])
    assert "expected pixels (1450) or millimetres in 35 mm terms (26mm), got '26 inch'" in capsys.readouterr().err


class _Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = torch.nn.Conv2d(3, 8, 3, 2), torch.nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


class _ChannelsLast(torch.nn.Module):
    """(1, H, W, 3) -> (1, H, W), as TensorFlow-made depth files (MiDaS's .tflite) take and give it."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 1, 3, 1, 1)

    def forward(self, x):
        return self.conv(x.permute(0, 3, 1, 2))[:, 0]


def test_files_made_elsewhere_channels_last_or_at_half_size_predict_and_a_classifier_is_refused(tmp_path, capsys):
    """A file without depthport's report: an NHWC image input (it was 'does not take an image') and a depth map
    at half the input's size (a traceback: 'cannot reshape array of size 1536 into shape (32,48)') give depth at the
    photo's size; a classifier's logits are one line, also for a folder, which leaves nothing written. A stretched
    photo is told of --letterbox only (depthport's export options do not apply to such a file)."""
    from conversion_memo import convert_toy

    from depthport.predict import model_input, photo_size

    torch.manual_seed(0)
    half, nhwc = torch.nn.Conv2d(3, 1, 3, 2, 1).eval(), _ChannelsLast().eval()
    files = {name: convert_toy(module, torch.rand(*shape), tmp_path / f"{name}.tflite") for name, module, shape in (
        ("half", half, (1, 3, 32, 48)), ("nhwc", nhwc, (1, 32, 48, 3)), ("classifier", _Classifier(), (1, 3, 32, 32)))}
    image = photo(45, 70)
    x = torch.from_numpy(model_input(image, files["nhwc"], (32, 48)))
    with torch.no_grad():
        want = {"nhwc": nhwc(x.permute(0, 2, 3, 1))[0].numpy(), "half": half(x)[0, 0].numpy()}
    for name in ("nhwc", "half"):
        assert Predictor(files[name], model_size=True).depth(image).shape == want[name].shape
        got = Predictor(files[name]).depth(image)
        assert got.shape == (45, 70)
        np.testing.assert_allclose(got, photo_size(want[name], (45, 70)), atol=1e-5)
    photo(20, 100).save(tmp_path / "wide.png")  # stretched 3.33x: only --letterbox applies to a file made elsewhere
    out, _ = ok(capsys, ["predict", files["nhwc"], tmp_path / "wide.png", "-o", tmp_path / "wide_depth.png"])
    assert out.rstrip().endswith("the photo stretched 3.33x to the file's aspect (48x32): --letterbox keeps the aspect")
    (tmp_path / "photos").mkdir()
    image.save(tmp_path / "photos" / "a.png")
    for source in (tmp_path / "photos" / "a.png", tmp_path / "photos"):
        capsys.readouterr()
        assert main(["predict", str(files["classifier"]), str(source), "-o", f"{tmp_path / 'out'}/"]) == 2
        err = capsys.readouterr().err.strip()
        assert err == ("depthport predict: error: classifier.tflite gives no depth map: its output is [1, 10], where a "
                       "depth model gives one map, (1, H, W) or (1, 1, H, W)")
        assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------ many images
@pytest.fixture
def photos(tmp_path) -> Path:
    folder = tmp_path / "photos"
    (folder / "sub").mkdir(parents=True)
    for i, name in enumerate(["b.jpg", "a.png", "c.jpg", "a.jpg", "sub/d.jpg"]):
        photo(30 + 4 * i, 50, seed=i).save(folder / name)
    (folder / "notes.txt").write_text("not an image")
    return folder


def test_folder_gives_one_output_per_image_named_after_it(tiny_tflite, photos, tmp_path, capsys):
    """Sorted by name, not recursive; a.png and a.jpg share a stem, so both keep their suffix."""
    assert open_inputs(photos).names == ["a.jpg", "a.png", "b.jpg", "c.jpg"]
    assert [item.name for item in open_inputs(photos).items()] == ["a.jpg", "a.png", "b.jpg", "c.jpg"]
    out, _ = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out", "--npy"])
    assert "4 images, 0 skipped" in out
    expect = {"a.jpg": "a.jpg", "a.png": "a.png", "b.jpg": "b", "c.jpg": "c"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"{stem}{suffix}" for stem in expect.values() for suffix in (".png", ".npy"))
    for name, stem in expect.items():
        depth = np.load(tmp_path / "out" / f"{stem}.npy")
        assert np.array_equal(depth, single(capsys, tiny_tflite, photos / name, tmp_path / "one"))
        assert Image.open(tmp_path / "out" / f"{stem}.png").size == Image.open(photos / name).size


def test_glob_pattern_and_npy_folder(tiny_tflite, photos, tmp_path, capsys):
    pattern = str(photos / "**" / "*.jpg")
    assert open_inputs(pattern).names == ["a.jpg", "b.jpg", "c.jpg", "sub/d.jpg"]
    out, _ = ok(capsys, ["predict", tiny_tflite, pattern, "-o", tmp_path / "png", "--npy", tmp_path / "npy"])
    assert "4 images, 0 skipped" in out
    assert sorted(str(p.relative_to(tmp_path / "png")) for p in (tmp_path / "png").rglob("*.*")) == [
        "a.png", "b.png", "c.png", "sub/d.png"]
    assert np.array_equal(np.load(tmp_path / "npy" / "sub" / "d.npy"),
                          single(capsys, tiny_tflite, photos / "sub" / "d.jpg", tmp_path / "one"))
    ok(capsys, ["predict", tiny_tflite, str(photos / "[bc].jpg"), "-o", tmp_path / "bc"])
    assert sorted(p.name for p in (tmp_path / "bc").iterdir()) == ["b.png", "c.png"]


def test_a_quoted_home_pattern_is_expanded_a_url_is_refused_and_a_pattern_in_the_wrong_case_explained(
        tiny_tflite, photos, tmp_path, capsys, monkeypatch):
    """'~/photos/*.jpg' in quotes reaches depthport with its ~ (the shell expands only an unquoted one). A pattern
    that matches nothing names what it would match in another letter case, or with its brackets as written."""
    monkeypatch.setenv("HOME", str(tmp_path))
    out, _ = ok(capsys, ["predict", tiny_tflite, "~/photos/*.jpg", "-o", tmp_path / "home"])
    assert "3 images, 0 skipped" in out and (tmp_path / "home" / "a.png").is_file()
    out, _ = ok(capsys, ["predict", tiny_tflite, "~/photos/b.jpg", "-o", tmp_path / "b.png"])
    assert out.startswith(f"wrote {tmp_path / 'b.png'}")
    out, _ = ok(capsys, ["predict", tiny_tflite, "~/photos/[b].jpg", "-o", tmp_path / "one"])  # a pattern: a folder
    assert out.startswith("1 image, 0 skipped")
    capsys.readouterr()  # a camera's IMG_0001.JPG, asked for as *.jpg: the pattern is exact, and the error says so
    (photos / "sub" / "d.jpg").rename(photos / "sub" / "IMG_0001.JPG")
    assert main(["predict", str(tiny_tflite), str(photos / "sub" / "*.jpg"), "-o", str(tmp_path / "cam")]) == 2
    assert "1 file(s) match it in another letter case (IMG_0001.JPG, ...)" in capsys.readouterr().err
    trip = tmp_path / "Italy [2024]"  # a folder's brackets read as a pattern's set of characters: said, not just 'none'
    trip.mkdir()
    photo().save(trip / "a.jpg")
    assert main(["predict", str(tiny_tflite), f"{trip}/*.jpg", "-o", str(tmp_path / "trip")]) == 2
    assert (f"no files match the pattern '{trip}/*.jpg'; 1 file(s) match '{tmp_path}/Italy [[]2024]/*.jpg': in a "
            "pattern [...] matches one of the characters inside, and [[] a bracket") in capsys.readouterr().err
    out, _ = ok(capsys, ["predict", tiny_tflite, f"{tmp_path}/Italy [[]2024]/*.jpg", "-o", tmp_path / "trip"])
    assert out.startswith("1 image, 0 skipped")  # named under the folder, as for any folder ('trip/Italy [2024]/a.png')
    assert [p.name for p in (tmp_path / "trip").iterdir()] == ["a.png"]
    capsys.readouterr()
    assert main(["predict", str(tiny_tflite), "https://example.com/photo.jpg", "-o", str(tmp_path / "u.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("https://example.com/photo.jpg is a URL, and depthport reads local files: download it first "
                        "(curl -O URL)") and len(err.splitlines()) == 1
    assert not (tmp_path / "u.png").exists()

def test_a_pattern_of_prompt_files_only_is_told_what_to_give(tmp_path):
    """A pattern that matches prompt depth files only (read beside their images, never as images) said "no files
    match the pattern ...; 1 file(s) match it in another letter case (a.prompt.png, ...)": the same file."""
    photo(30, 40).save(tmp_path / "a.jpg")
    Image.fromarray(np.full((24, 32), 1000, np.uint16)).save(tmp_path / "a.prompt.png")
    with pytest.raises(InputError, match=re.escape(f"the pattern '{tmp_path}/*.prompt.png' matches prompt depth files "
                                                   "only (a.prompt.png, ...): each is read beside its image; give the "
                                                   "images (e.g. 'photos/*.jpg')")):
        open_inputs(f"{tmp_path}/*.prompt.png")
    assert open_inputs(f"{tmp_path}/a.*").names == ["a.jpg"]


def test_bad_image_in_a_folder_is_skipped_and_counted(tiny_tflite, photos, tmp_path, capsys):
    (photos / "bad.jpg").write_text("not a picture")
    out, err = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out"])
    assert "5 images, 1 skipped (bad.jpg: cannot read image" in out
    assert "skipped bad.jpg: cannot read image" in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.jpg.png", "a.png.png", "b.png", "c.png"]
    pattern = f"{photos}/**/*"  # a trip's day1/, day2/: the subfolder is named with the pattern that reads it
    assert f" fps; 1 other file (.txt) in the folder passed over, not named like images; 1 folder (sub) in the " \
           f"folder not searched: for every image under it give a quoted pattern, '{pattern}'; " in out
    out, _ = ok(capsys, ["predict", tiny_tflite, pattern, "-o", tmp_path / "all"])
    assert "6 images, 1 skipped (bad.jpg: " in out and (tmp_path / "all" / "sub" / "d.png").is_file()


def test_several_skipped_are_named_once_with_their_reasons(tiny_tflite, photos, tmp_path, capsys):
    """Each skipped image gets its line with the reason as it is skipped; the summary names them, four at most, and
    does not repeat the reasons (it printed three of them in full, a wall of text under their own lines)."""
    bad = ["bad1.jpg", "bad2.png", "bad3.webp", "bad4.tif", "bad5.jpg"]
    for name in bad:
        (photos / name).write_text("not a picture")
    out, err = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out"])
    assert "9 images, 5 skipped (bad1.jpg, bad2.png, bad3.webp, bad4.tif and 1 more: reasons above), " in out
    assert "cannot read image" not in out
    assert [line.split(":")[0] for line in err.splitlines() if line.startswith("skipped")] == [
        f"skipped {name}" for name in bad]
    assert all(f"skipped {name}: cannot read image" in err for name in bad)
    for name in bad[2:]:
        (photos / name).unlink()
    out, _ = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out2"])
    assert "6 images, 2 skipped (bad1.jpg, bad2.png: reasons above), " in out


DATA = Path(__file__).parent / "data"


def heic_source() -> np.ndarray:
    """The 64x48 picture (top band yellow, left band blue, red growing rightward) that tests/predict/data/'s two HEIC
    files were encoded from with pillow-heif 1.8.1 (libheif 1.23, x265, quality 95): IMG_0001.HEIC as an iPhone
    stores a portrait photo (the pixels landscape, an irot box turning them, EXIF orientation 6 beside it, and the
    35 mm-equivalent focal length, 26 mm), and
    hdr10_profile.heic at 10 bits with ``swapped_profile()`` embedded. No encoder is installed here (pi-heif decodes
    only), so the files are committed (1.2 and 1.4 KB)."""
    y, x = np.mgrid[0:48, 0:64]
    rgb = np.stack([x * 4, y * 5, np.where(x < 16, 230, 40)], -1).astype(np.uint8)
    rgb[:8] = [250, 250, 20]
    return rgb


def test_iphone_heic_is_read_as_shown_and_turned_once(tmp_path):
    """HEIC (the iPhone's default) is read through pi-heif: the stored landscape pixels come out portrait, turned
    by the file's irot box and not a second time by its EXIF orientation; a 10-bit HEIC with an ICC profile is read
    at 8 bits in sRGB. HEVC is lossy: the figures allow its error (mean ~1.3 levels here)."""
    data = (DATA / "IMG_0001.HEIC").read_bytes()
    assert data[data.index(b"irot") + 4] == 3  # the stored pixels are turned 3 x 90 degrees anticlockwise to show
    with Image.open(DATA / "IMG_0001.HEIC") as raw:
        assert raw.info["original_orientation"] == 6 and raw.getexif()[0x0112] == 1  # EXIF says it too; reset
    shown = np.asarray(load_image(DATA / "IMG_0001.HEIC")).astype(int)
    upright = np.rot90(heic_source(), -1).astype(int)  # orientation 6: turned 90 degrees clockwise to show
    assert shown.shape == upright.shape == (64, 48, 3)  # not turned, or turned twice, it would be 48 x 64
    assert np.abs(shown - upright).mean() < 3 and np.abs(shown - upright).max() <= 12
    assert np.abs(shown - upright[::-1, ::-1]).mean() > 40  # nor upside down
    assert load_image(DATA / "IMG_0001.HEIC").info[FOCAL_KEY] == 26  # for metric models that need a focal length
    assert load_image(DATA / "IMG_0001.HEIC").info[TURNED_KEY] == 6  # a prompt in the sensor's orientation: said
    colours = np.asarray(load_image(DATA / "hdr10_profile.heic")).astype(int)
    assert colours.shape == (48, 64, 3)
    assert np.abs(colours - heic_source()[..., ::-1]).mean() < 3  # red and blue exchanged, as its profile says
    assert np.abs(colours - heic_source()).mean() > 40


def test_heic_photos_in_a_folder_are_predicted_and_a_broken_one_is_skipped(tiny_tflite, photos, tmp_path, capsys):
    """A phone's folder with .HEIC and Fujifilm's .HIF beside JPEGs: each gets depth at its displayed size; a HEIC
    that does not decode is skipped with one line and counted."""
    (photos / "IMG_0001.HEIC").write_bytes((DATA / "IMG_0001.HEIC").read_bytes())
    (photos / "DSCF0001.HIF").write_bytes((DATA / "hdr10_profile.heic").read_bytes())
    (photos / "IMG_0002.HEIC").write_bytes(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic")
    out, err = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out", "--npy"])
    assert "7 images, 1 skipped (IMG_0002.HEIC: cannot read image" in out
    assert len([line for line in err.splitlines() if "IMG_0002.HEIC" in line]) == 1
    assert np.load(tmp_path / "out" / "IMG_0001.npy").shape == (64, 48)
    assert Image.open(tmp_path / "out" / "IMG_0001.png").size == (48, 64)
    assert np.load(tmp_path / "out" / "DSCF0001.npy").shape == (48, 64)



def test_verification_images_with_names_that_are_not_utf8_are_named_so_a_report_can_hold_them(tmp_path):
    """--images DIR with a Latin-1 name (caf\\xe9.jpg): the report, card and HTML page name it caf\ufffd.jpg; the raw
    name made the export fail writing report.html (UnicodeEncodeError)."""
    from depthport.core.images import image_set

    folder = Path(os.fsdecode(bytes(tmp_path) + b"/fotos-\xe9t\xe9"))
    folder.mkdir()
    Image.fromarray(np.full((20, 30, 3), 120, np.uint8)).save(Path(os.fsdecode(bytes(folder) + b"/caf\xe9.jpg")))
    description, images = image_set(folder)
    assert [name for name, _ in images] == ["caf\ufffd.jpg"] and description.endswith("fotos-\ufffdt\ufffd")
    json.dumps({"images": [name for name, _ in images], "source": description}, ensure_ascii=False).encode("utf-8")


def test_camera_raw_is_refused_with_what_to_do_and_passed_over_beside_its_jpeg(tmp_path):
    """A DNG is a TIFF whose first image is often a small preview: read by suffix as RAW, refused in one line. A
    folder of RAW + JPEG pairs (as cameras write them) reads the JPEGs; a folder of RAW files alone says so."""
    photo = Image.fromarray(np.full((20, 30, 3), 120, np.uint8))
    photo.save(tmp_path / "IMG_0001.dng", format="TIFF")  # Pillow alone would read it as a plain TIFF
    with pytest.raises(InputError, match=r"IMG_0001\.dng: camera RAW is sensor data to be developed; export a JPEG"):
        load_image(tmp_path / "IMG_0001.dng")
    photo.save(tmp_path / "IMG_0001.JPG")
    (tmp_path / "IMG_0002.CR2").write_bytes(b"II*\x00\x10\x00\x00\x00CR\x02\x00")
    assert [name for name, _ in folder_set(tmp_path)] == ["IMG_0001.JPG"]
    (tmp_path / "IMG_0001.JPG").unlink()
    with pytest.raises(InputError, match=r"no images in .*; its camera RAW files \(\.CR2, \.dng\) are not read"):
        folder_set(tmp_path)
    (tmp_path / "100APPLE").mkdir()  # a phone's DCIM: the photos are a folder down
    with pytest.raises(InputError, match=r"; 1 folder \(100APPLE\) in the folder not searched: for every image under "
                                         r"it give a quoted pattern, '.*/\*\*/\*'"):
        folder_set(tmp_path)

def test_a_folder_names_its_raw_files_without_a_jpeg_its_archives_and_its_other_files(tiny_tflite, photos, tmp_path,
                                                                                     capsys):
    """A folder given to predict said nothing of what it held beside its images and videos: a RAW file with no JPEG
    beside it (a shot taken in RAW only) is now skipped with what to do, as a pattern skips it, an archive is named
    as not unpacked, and sidecars and documents as passed over; a RAW file beside its JPEG is not named (a Pixel's
    pair too: its names share what comes before the first dot)."""
    (photos / "a.CR2").write_bytes(b"II*\x00\x10\x00\x00\x00CR\x02\x00")  # beside a.jpg: the camera's pair
    photo().save(photos / "PXL_20240101_120000000.RAW-01.COVER.jpg")  # a Pixel's pair, named apart
    (photos / "PXL_20240101_120000000.RAW-02.ORIGINAL.dng").write_bytes(b"II*\x00\x08\x00\x00\x00")
    (photos / "e.NEF").write_bytes(b"MM\x00*\x00\x00\x00\x08")  # RAW only
    (photos / "more photos.zip").write_bytes(b"PK\x03\x04" + b"\x00" * 26)
    out, err = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out"])
    assert "6 images, 1 skipped (e.NEF: cannot read image" in out and "camera RAW is sensor data to be developed" in err
    assert "; 1 other file (.txt) in the folder passed over, not named like images; 1 archive (more photos.zip) not " \
           "unpacked: unpack it first and give the folder of its images; 1 folder (sub)" in out
    assert "a.CR2" not in out + err and "ORIGINAL.dng" not in out + err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "PXL_20240101_120000000.RAW-01.COVER.png", "a.jpg.png", "a.png.png", "b.png", "c.png"]


def test_jpeg_xl_svg_and_broken_links_are_skipped_with_what_to_do_not_passed_over(tiny_tflite, photos, tmp_path,
                                                                                   capsys):
    """JPEG XL and SVG, which Pillow does not decode, and links whose target is gone (a folder of links into a
    drive that is not mounted) are named as what they are, alone, in a folder and in a pattern: they were passed
    over in silence in a folder ('no images in' a folder of them), or 'not an image format Pillow can read'."""
    (photos / "IMG_0003.jxl").write_bytes(b"\xff\x0a\xfa\x7f\x01\x10")  # a JPEG XL codestream's signature
    (photos / "logo.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"/>')
    (photos / "IMG_0004.jpg").symlink_to(tmp_path / "unmounted" / "IMG_0004.jpg")
    photo().save(tmp_path / "renamed.jxl", format="PNG")  # named .jxl, a PNG inside: read as what it holds
    assert load_image(tmp_path / "renamed.jxl").size == (60, 40)
    for name, reason in (("IMG_0003.jxl", "cannot read image {}: JPEG XL, which Pillow does not decode: convert it to "
                                          "PNG or JPEG first (djxl IMG.jxl IMG.png)"),
                         ("logo.svg", "cannot read image {}: an SVG drawing, which has no pixels until it is "
                                      "rendered: render it to PNG first"),
                         ("IMG_0004.jpg", f"image not found: {{}}, a link to {tmp_path / 'unmounted' / 'IMG_0004.jpg'}"
                                          ", which is not there")):
        with pytest.raises(InputError, match=re.escape(reason.format(photos / name))):
            load_image(photos / name)
    out, err = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out"])
    assert "7 images, 3 skipped (IMG_0003.jxl, IMG_0004.jpg, logo.svg: reasons above)" in out
    assert "skipped IMG_0003.jxl: cannot read image" in err and "skipped IMG_0004.jpg: image not found: " in err
    out, _ = ok(capsys, ["predict", tiny_tflite, f"{photos}/*", "-o", tmp_path / "pattern"])
    assert "7 images, 3 skipped (IMG_0003.jxl, IMG_0004.jpg, logo.svg: reasons above)" in out
    assert "1 other file (.txt) matching the pattern passed over" in out  # notes.txt alone
    out, _ = ok(capsys, ["predict", tiny_tflite, photos / "a.png", photos / "IMG_0004.jpg", "-o", tmp_path / "given"])
    assert "2 images, 1 skipped (IMG_0004.jpg: image not found: " in out  # the shell's unquoted photos/*.jpg


def test_a_link_that_loops_is_skipped_not_a_traceback(tiny_tflite, photos, tmp_path, capsys):
    """A link that points back to itself (b.jpg -> b.jpg, left by a broken sync): Path.resolve raised RuntimeError
    (Python 3.11) in the outputs' check, a traceback before any image, for a folder, a pattern, several files and
    the link alone; and for a -o that is one. Now it is skipped and counted like any unreadable image, one line
    alone, and an -o link that loops is replaced by the depth."""
    (photos / "b2.jpg").symlink_to("b2.jpg")
    for source in (photos, f"{photos}/*.jpg"):
        out, err = ok(capsys, ["predict", tiny_tflite, source, "-o", tmp_path / "out"])
        assert ", 1 skipped (b2.jpg: cannot read image " in out and "symbolic links" in out, out
    out, _ = ok(capsys, ["predict", tiny_tflite, photos / "a.png", photos / "b2.jpg", "-o", tmp_path / "given"])
    assert out.startswith("2 images, 1 skipped (b2.jpg: ")
    assert main(["predict", str(tiny_tflite), str(photos / "b2.jpg"), "-o", str(tmp_path / "one.png")]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "one.png").exists()
    (tmp_path / "loop.png").symlink_to("loop.png")
    ok(capsys, ["predict", tiny_tflite, photos / "a.png", "-o", tmp_path / "loop.png"])
    assert not (tmp_path / "loop.png").is_symlink() and Image.open(tmp_path / "loop.png").size == (50, 34)


def test_a_file_no_decoder_reads_says_what_it_holds_and_what_to_do(tiny_tflite, photos, tmp_path, capsys):
    """What people hand over in place of a photo is named by its first bytes, alone, in a folder, in a pattern and
    in verification's --images: an archive a phone or a cloud download made (ZIP, tar.gz), a web page saved under
    the photo's name, a Git LFS pointer, a PDF scan, an HDR render, a video or a voice memo named like a photo. Each
    said 'not a .jpg image Pillow can read: damaged, cut short, or another kind of file named .jpg' or 'not an image
    format Pillow can read'; a folder of archives said 'no images in' and nothing of them."""
    import tarfile
    import zipfile

    from depthport.file_kind import what_it_holds

    made = tmp_path / "made"
    made.mkdir()
    photo().save(made / "IMG_0001.jpg")
    with zipfile.ZipFile(made / "iCloud Photos.zip", "w") as archive:
        archive.write(made / "IMG_0001.jpg", "IMG_0001.jpg")
    with tarfile.open(made / "trip.tar.gz", "w:gz") as archive:
        archive.add(made / "IMG_0001.jpg", "IMG_0001.jpg")
    make_video(made / "clip.mp4", 2)
    cases = {
        "iCloud Photos.zip": "a ZIP archive: unpack it first (unzip 'iCloud Photos.zip' -d 'iCloud Photos') and "
                             "give the folder of its images",
        "trip.tar.gz": "a gzip-compressed file: unpack it first (tar -xf trip.tar.gz, or gunzip for one file)",
        "IMG_0005.jpg": "a web page (HTML), not an image: a download that saved the page instead of the picture?",
        "IMG_0006.png": "a Git LFS pointer, not the image it stands for: fetch the file itself (git lfs pull)",
        "scan.pdf": "a PDF document: export its page as a PNG or JPEG image first",
        "render.exr": "an OpenEXR image (high dynamic range, floating point), which Pillow does not decode",
        "render.png": "an OpenEXR image (high dynamic range, floating point), which Pillow does not decode",
        "IMG_0007.jpg": "a video, not a photo: rename it IMG_0007.mp4, and predict writes its depth video",
        "memo.jpg": "an audio file (MP3), with no picture to take depth from",
        "readme.jpg": "a text file, not an image",
        "logo.png": "an SVG drawing, which has no pixels until it is rendered",
    }
    contents = {
        "iCloud Photos.zip": (made / "iCloud Photos.zip").read_bytes(),
        "trip.tar.gz": (made / "trip.tar.gz").read_bytes(),
        "IMG_0005.jpg": b"\n<!DOCTYPE html>\n<html lang='en'><head><title>IMG_0005.jpg - Google Drive</title>",
        "IMG_0006.png": b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a21\nsize 2048\n",
        "scan.pdf": b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj",
        "render.exr": b"\x76\x2f\x31\x01\x02\x00\x00\x00channels",
        "render.png": b"\x76\x2f\x31\x01\x02\x00\x00\x00channels",  # named like a format Pillow reads
        "IMG_0007.jpg": (made / "clip.mp4").read_bytes(),
        "memo.jpg": b"ID3\x04\x00\x00\x00\x00\x00\x00",
        "readme.jpg": "Fotos vom Ausflug, Grüße\n".encode(),
        "logo.png": b'<?xml version="1.0"?>\n<!-- Generator: Adobe Illustrator -->\n<svg width="8" height="8"/>',
    }
    for name, reason in cases.items():
        (tmp_path / name).write_bytes(contents[name])
        assert what_it_holds(tmp_path / name).startswith(reason)
        with pytest.raises(InputError, match=re.escape(f"cannot read image {tmp_path / name}: {reason}")):
            load_image(tmp_path / name)
    assert what_it_holds(tmp_path / "made" / "IMG_0001.jpg") is None  # a JPEG is no kind of its own here
    figure = tmp_path / "figure 1.eps"  # Pillow opens PostScript, and renders it only through Ghostscript
    figure.write_text("%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nnewpath 0 0 moveto 9 9 lineto stroke\n")
    if shutil.which("gs") is None:  # it said 'Unable to locate Ghostscript on paths'
        with pytest.raises(InputError, match=re.escape(
                "a PostScript or EPS drawing, which Pillow renders only through Ghostscript (not installed): render "
                "it to PNG first (gs -sDEVICE=png16m -r150 -o 'figure 1.png' 'figure 1.eps')")):
            load_image(figure)
    else:
        assert load_image(figure).width > 0
    for name in ("IMG_0005.jpg", "IMG_0006.png", "IMG_0007.jpg"):
        shutil.copy(tmp_path / name, photos / name)
    out, err = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out"])
    assert "7 images, 3 skipped (IMG_0005.jpg, IMG_0006.png, IMG_0007.jpg: reasons above)" in out
    assert f"skipped IMG_0006.png: cannot read image {photos / 'IMG_0006.png'}: a Git LFS pointer" in err
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    for name in ("iCloud Photos.zip", "trip.tar.gz", "scan.pdf"):
        shutil.copy(tmp_path / name, downloads / name)
    archives = "2 archives (iCloud Photos.zip, trip.tar.gz) not unpacked: unpack them first and give the folder of " \
               "their images"
    for argv in (["predict", tiny_tflite, downloads], ["predict", tiny_tflite, f"{downloads}/*"],
                 ["verify", tiny_tflite, "--reference", "da2-tiny", "--weights", "random", "--images", downloads]):
        capsys.readouterr()
        assert main([str(a) for a in argv]) == 2
        err = capsys.readouterr().err
        assert archives in err and len(err.strip().splitlines()) == 1, err
    capsys.readouterr()
    assert main(["predict", str(tiny_tflite), str(downloads / "scan.pdf"), str(downloads / "iCloud Photos.zip")]) == 2
    assert "1 archive (iCloud Photos.zip) not unpacked: unpack it first and give the folder of its images" in \
        capsys.readouterr().err


def test_a_pipe_is_refused_for_what_it_is(tiny_tflite, photos, tmp_path, capsys):
    """'-' (standard input or output) is said to be what it is: it was 'image not found: -', and -o - got the
    suffix advice with a folder named '-/'."""
    for argv, message in ((["-"], "'-' (standard input) is not read: give the path of the image, folder or video"),
                          ([str(photos / "a.png"), "-o", "-"], "-o -: depthport writes files, not standard output"),
                          ([str(photos / "a.png"), "--npy", "-"], "--npy -: depthport writes files, not standard "
                                                                  "output: give --npy a file name or a folder")):
        capsys.readouterr()
        assert main(["predict", str(tiny_tflite), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
    assert not Path("-").exists()


# ------------------------------------------------------------------------------------------------ video
def test_videos_in_a_folder_of_photos_are_passed_over_and_named(tiny_tflite, photos, tmp_path, capsys):
    """A phone's export: each Live Photo's .MOV beside its still. The stills are predicted, and the summary names
    the videos passed over (a folder takes images) instead of leaving them out in silence. A pattern passes over
    videos too, and the files not named like images that it matches (sidecars, notes), naming their suffixes."""
    for name in ("IMG_0001.MOV", "IMG_0002.MOV"):
        make_video(photos / name, 2)
    assert open_inputs(photos).videos == ["IMG_0001.MOV", "IMG_0002.MOV"]
    out, _ = ok(capsys, ["predict", tiny_tflite, photos, "-o", tmp_path / "out"])
    assert "4 images, 0 skipped, " in out
    assert f" fps; 2 videos (IMG_0001.MOV, IMG_0002.MOV) in the folder passed over: give them on their own, one " \
           f"video or a pattern of videos ('{photos}/*.MOV'); 1 other file (.txt) in the folder passed over, not " \
           "named like images; 1 folder (sub) in the folder not searched" in out
    assert not any(p.name.startswith("IMG_") for p in (tmp_path / "out").iterdir())
    (photos / "IMG_0001.AAE").write_text("<plist/>")  # the iPhone's edit sidecar; Google Takeout's .json alike
    out, _ = ok(capsys, ["predict", tiny_tflite, f"{photos}/*", "-o", tmp_path / "pattern"])  # the same by a pattern
    assert "4 images, 0 skipped, " in out
    assert "; 2 videos (IMG_0001.MOV, IMG_0002.MOV) matching the pattern passed over: give them on their own, " \
           "one video or a pattern of videos" in out
    assert "2 other files (.AAE, .txt) matching the pattern passed over, not named like images; " in out
    videos = open_inputs(f"{photos}/IMG_*")  # videos and no image: the videos
    assert videos.kind == "videos" and videos.names == ["IMG_0001.MOV", "IMG_0002.MOV"] and videos.others == [
        "IMG_0001.AAE"]


def test_a_photo_with_a_name_near_the_longest_is_written(tiny_tflite, tmp_path, capsys):
    """A photo named in 80 Japanese characters (248 bytes of a 255-byte limit) is legal, and so is its depth's name;
    the temporary file beside it (15 bytes more) was not: 'File name too long', and the folder stopped there. An
    output whose own name is too long is refused before any work (a folder of videos failed with a traceback at the
    end, in the rename)."""
    folder = tmp_path / "photos"
    folder.mkdir()
    long = "東京タワー" * 16 + "_night"  # 246 bytes in UTF-8
    for name in ("a.jpg", f"{long}.jpg", "z.jpg"):
        photo().save(folder / name)
    out, _ = ok(capsys, ["predict", tiny_tflite, folder, "-o", tmp_path / "out", "--npy"])
    assert out.startswith("3 images, 0 skipped")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"{stem}{suffix}" for stem in ("a", long, "z") for suffix in (".npy", ".png"))
    ok(capsys, ["predict", tiny_tflite, folder / f"{long}.jpg", "-o", tmp_path / "one" / f"{long}.png"])
    assert [p.name for p in (tmp_path / "one").iterdir()] == [f"{long}.png"]
    clips = tmp_path / "clips"  # a video named in 81 Chinese characters: its NAME.timestamps.json is 259 bytes
    clips.mkdir()
    make_video(clips / ("写" * 81 + ".mp4"), 2)
    make_video(clips / "b.mp4", 2)
    assert main(["predict", str(tiny_tflite), str(clips), "-o", str(tmp_path / "depth")]) == 2  # before any work
    assert ".timestamps.json: its name is 259 bytes, longer than the 255 its folder takes; give a shorter name, or " \
           "rename the input" in capsys.readouterr().err
    assert not (tmp_path / "depth").exists()


def test_an_output_that_is_a_folder_is_refused_before_any_work(tiny_tflite, photos, tmp_path, capsys):
    """A folder named like an image ('a.png/x.jpg' beside 'a.jpg', read by a recursive pattern) made one output both
    a file and a folder: FileExistsError, a traceback mid-way, the rest of the folder not done; so did a folder
    already in the output folder under an output's name. Both are one line now, before any work."""
    (photos / "a.jpg.png").mkdir()  # beside a.jpg and a.png, whose outputs keep their suffixes: a.jpg.png
    photo().save(photos / "a.jpg.png" / "x.jpg")
    assert main(["predict", str(tiny_tflite), f"{photos}/**/*", "-o", str(tmp_path / "out")]) == 2
    assert (f"-o {tmp_path / 'out' / 'a.jpg.png'} would be both the depth of a.jpg and the folder of a.jpg.png/x.jpg's; "
            "give another folder, or rename one of them") in capsys.readouterr().err
    shutil.rmtree(photos / "a.jpg.png")
    (tmp_path / "out" / "b.png").mkdir(parents=True)
    assert main(["predict", str(tiny_tflite), str(photos), "-o", str(tmp_path / "out")]) == 2
    assert f"-o {tmp_path / 'out' / 'b.png'}, the depth of b.jpg, is a folder; give another folder" in \
        capsys.readouterr().err
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["b.png"]


def test_an_output_folder_inside_the_input_is_said_not_advised(tiny_tflite, photos, tmp_path, capsys, monkeypatch):
    """`predict m 'trip/**/*' -o trip/depth` twice: the second run reads the first one's depth PNGs as photos, and
    writing over them is refused; the line said '-o would overwrite the image trip/depth/a.png; give another
    folder', as if a photo were at risk: it says the output folder is among what the input reads. In the photos' own
    folder with the default output, the summary advised the pattern '**/*', which meets that refusal: the output
    folder is no longer named as one to search."""
    ok(capsys, ["predict", tiny_tflite, f"{photos}/**/*", "-o", photos / "depth"])
    assert main(["predict", str(tiny_tflite), f"{photos}/**/*", "-o", str(photos / "depth")]) == 2
    assert (f"-o would overwrite the image {photos}/depth/a.jpg.png: {photos / 'depth'} is among what the input reads "
            "(an earlier run's outputs?): give a folder outside it, or a pattern that leaves it out") in \
        capsys.readouterr().err
    monkeypatch.chdir(photos)
    out, _ = ok(capsys, ["predict", tiny_tflite, ".", "--npy", "stacks"])
    out, _ = ok(capsys, ["predict", tiny_tflite, ".", "--npy", "stacks"])
    assert out.startswith("4 images, 0 skipped") and "1 folder (sub) in the folder not searched" in out, out


def test_a_folder_of_more_videos_than_images_is_its_videos(tiny_tflite, tmp_path, capsys):
    """A folder of clips with a poster JPEG and a GIF in it: the two images were predicted and every clip passed over
    (a folder took its images whenever it held one). A folder or pattern is now its videos where they are more, the
    images named as passed over with the pattern that reads them; a tie (a Live Photo's still and .MOV) stays its
    images, and so does a phone's folder of Live Photos (each .MOV beside its still is no clip of its own) with a
    clip more. The advice names a pattern for each suffix (one for .mp4 missed the .mov and the .mkv)."""
    clips = tmp_path / "clips"
    clips.mkdir()
    for name in ("a.mp4", "b.mov", "c.mkv"):
        make_video(clips / name, 2)
    photo().save(clips / "poster.jpg")
    photo().save(clips / "loop.gif", save_all=True, append_images=[photo(seed=1)])
    out, _ = ok(capsys, ["predict", tiny_tflite, clips, "-o", tmp_path / "depth"])
    lines = out.strip().splitlines()
    assert lines[-1].startswith("3 videos, 0 skipped, 6 frames at ") and (
        f"; 2 images (loop.gif, poster.jpg) in the folder passed over (more are videos): give them on their own, one "
        f"image or a pattern of images ('{clips}/*.gif', '{clips}/*.jpg')" in lines[-1]), out
    assert sorted(p.name for p in (tmp_path / "depth").glob("*.mp4")) == ["a.mp4", "b.mp4", "c.mp4"]
    out, _ = ok(capsys, ["predict", tiny_tflite, f"{clips}/*", "-o", tmp_path / "pattern"])
    assert "3 videos, 0 skipped" in out and "2 images (loop.gif, poster.jpg) matching the pattern passed over" in out
    (clips / "day1").mkdir()  # a recursive pattern: the advice's patterns name each image's folder
    (clips / "poster.jpg").rename(clips / "day1" / "poster.jpg")
    out, _ = ok(capsys, ["predict", tiny_tflite, f"{clips}/**/*", "-o", tmp_path / "recursive"])
    assert f"pattern of images ('{clips}/day1/*.jpg', '{clips}/*.gif')" in out, out
    (clips / "day1" / "poster.jpg").rename(clips / "poster.jpg")
    (clips / "day1").rmdir()
    phone = tmp_path / "phone"  # three Live Photos (a still and its .MOV each) and one clip: a folder of photos
    phone.mkdir()
    for i in range(3):
        photo(seed=i).save(phone / f"IMG_000{i}.JPG")
        make_video(phone / f"IMG_000{i}.MOV", 2)
    make_video(phone / "IMG_0009.MOV", 2)
    assert open_inputs(phone).kind == "images" and open_inputs(f"{phone}/*").kind == "images"
    (clips / "c.mkv").unlink()
    out, _ = ok(capsys, ["predict", tiny_tflite, clips, "-o", tmp_path / "tie"])
    assert out.startswith("2 images, 0 skipped") and (
        f"2 videos (a.mp4, b.mov) in the folder passed over: give them on their own, one video or a pattern of videos "
        f"('{clips}/*.mp4', '{clips}/*.mov')" in out), out


def test_a_folder_or_pattern_of_videos_gives_each_its_depth_video(tiny_tflite, tmp_path, capsys):
    """A folder of clips: for each video, in its own bar, the depth video, stack and timestamps of predicting it
    alone, named after it in the -o folder (two videos of one name keep their suffixes); a video that cannot be
    read is reported, skipped and counted; the last line counts the videos and their frames."""
    clips = tmp_path / "clips"
    clips.mkdir()
    make_video(clips / "a.mov", 3)
    make_video(clips / "a.mp4", 2, hw=(40, 56))
    make_video(clips / "b.MOV", 4, rotation=90)
    (clips / "c.mp4").write_text("not a video")
    (clips / ".b.MOV").write_text("a macOS twin")
    ok(capsys, ["predict", tiny_tflite, clips / "b.MOV", "-o", tmp_path / "alone.mp4"])
    out, err = ok(capsys, ["predict", tiny_tflite, clips, "-o", tmp_path / "depth", "--npy", tmp_path / "stacks"])
    assert "skipped c.mp4: cannot read video" in err
    lines = out.strip().splitlines()
    assert lines[0].startswith("a.mov: 3 frames, 0 skipped, ") and lines[1].startswith("a.mp4: 2 frames, 0 skipped")
    assert lines[2].startswith("b.MOV: 4 frames, 0 skipped, ") and lines[2].endswith(
        f"wrote {tmp_path / 'depth' / 'b.mp4'}, {tmp_path / 'stacks' / 'b.npy'} and "
        f"{tmp_path / 'stacks' / 'b.timestamps.json'}")
    assert lines[3].startswith("4 videos, 1 skipped (c.mp4: cannot read video ") and " 9 frames at " in lines[3]
    assert lines[3].endswith(f"; wrote {tmp_path / 'depth'}")
    assert sorted(p.name for p in (tmp_path / "depth").iterdir()) == ["a.mov.mp4", "a.mp4.mp4", "b.mp4"]
    assert sorted(p.name for p in (tmp_path / "stacks").iterdir()) == [
        "a.mov.npy", "a.mov.timestamps.json", "a.mp4.npy", "a.mp4.timestamps.json", "b.npy", "b.timestamps.json"]
    assert np.array_equal(np.load(tmp_path / "stacks" / "b.npy"), np.load(tmp_path / "alone.npy"))
    assert json.loads((tmp_path / "stacks" / "b.timestamps.json").read_text()) == {
        **json.loads((tmp_path / "alone.timestamps.json").read_text()), "stack": "b.npy"}
    assert np.load(tmp_path / "stacks" / "a.mp4.npy").shape == (2, 40, 56)
    out, _ = ok(capsys, ["predict", tiny_tflite, f"{clips}/*.MOV", "-o", tmp_path / "pattern"])
    assert out.strip().splitlines()[-1].startswith("1 video, 0 skipped, 4 frames at ")
    assert sorted(p.name for p in (tmp_path / "pattern").iterdir()) == ["b.mp4", "b.npy", "b.timestamps.json"]
    assert main(["predict", str(tiny_tflite), str(clips), "-o", str(tmp_path / "all.mp4")]) == 2  # before any work
    assert f"-o {tmp_path / 'all.mp4'} names a file, and a folder or pattern of videos writes one file per video " \
           f"into a folder; give -o FOLDER (e.g. {tmp_path / 'all'})" in capsys.readouterr().err
    assert not (tmp_path / "all.mp4").exists() and not (tmp_path / "all").exists()


def test_several_files_given_one_by_one_are_taken_as_a_patterns_matches(tiny_tflite, photos, tmp_path, capsys):
    """`predict m.tflite photos/*.jpg` unquoted: the shell gives each file (argparse said 'unrecognized arguments').
    Each image is predicted, as a pattern's matches are, named relative to the files' common folder; a video or
    another file among them is passed over and named; videos alone are videos; a folder among them (the shell's
    photos/* gives the subfolders too: the command failed on it) is passed over and named with the pattern that
    reads it; folders alone, or a file that is not there, is one line before any work."""
    make_video(tmp_path / "clip.mp4", 2)
    given = [photos / "c.jpg", photos / "a.jpg", photos / "sub" / "d.jpg", photos / "notes.txt", tmp_path / "clip.mp4",
             photos / "a.jpg"]
    out, _ = ok(capsys, ["predict", tiny_tflite, *given, "-o", tmp_path / "out"])
    assert out.startswith("3 images, 0 skipped, ")
    assert "; 1 video (clip.mp4) among the files given passed over: give it on its own" in out
    assert "1 other file (.txt) among the files given passed over, not named like images" in out
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.png"))
    assert written == ["photos/a.png", "photos/c.png", "photos/sub/d.png"]
    with native_stderr_muted():
        predictor = Predictor(tiny_tflite)
        alone = predictor.picture(predictor.depth(load_image(photos / "sub" / "d.jpg")))
    assert np.array_equal(np.asarray(Image.open(tmp_path / "out" / "photos" / "sub" / "d.png")), np.asarray(alone))
    make_video(tmp_path / "clip2.mp4", 3)
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "clip.mp4", tmp_path / "clip2.mp4", "-o", tmp_path / "v"])
    assert out.strip().splitlines()[-1].startswith("2 videos, 0 skipped, 5 frames at ")
    out, _ = ok(capsys, ["predict", tiny_tflite, *sorted(photos.iterdir()), "-o", tmp_path / "shell"])
    assert out.startswith("4 images, 0 skipped") and ("; 1 folder (sub) among the files given not searched: for every "
                                                      f"image under it give a quoted pattern, '{photos}/**/*'") in out
    photo().save(photos / "a.prompt.png")
    photo().save(photos / "b.prompt.png")
    for bad, message in (([photos, photos / "sub"], f"{photos} is a folder, among 2 inputs that are all folders: give "
                          "one folder at a time, or a quoted pattern ('photos/**/*')"),
                         ([photos / "a.jpg", photos / "gone.jpg"], f"input not found: {photos / 'gone.jpg'}"),
                         ([photos / "a.prompt.png", photos / "b.prompt.png"], "the 2 files given are prompt depth "
                          "files only: give their images")):
        assert main(["predict", str(tiny_tflite), *map(str, bad), "-o", str(tmp_path / "none")]) == 2
        assert message in capsys.readouterr().err and not (tmp_path / "none").exists()

def timed_frame(hw: tuple[int, int], i: int, rate: int = 25, start: int = 0) -> av.VideoFrame:
    """Frame ``i`` of a test video: ``photo(*hw, seed=i)`` at time (start + i) / rate."""
    frame = av.VideoFrame.from_image(photo(*hw, seed=i))
    frame.pts, frame.time_base = start + i, Fraction(1, rate)
    return frame


def make_video(path: Path, frames: int, hw=(48, 64), rate=25, rotation: int = 0, sar: Fraction | None = None,
               start: int = 0) -> list[tuple[int, int]]:
    """An MJPEG video (every frame a JPEG of its own), a different smooth picture in each frame; returns each
    packet's byte offset in the file and size, for corrupting one frame. ``sar``: its pixels' aspect ratio;
    ``start``: the first frame's time, in frames."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mjpeg", rate=rate)
        stream.height, stream.width = hw
        stream.pix_fmt = "yuvj420p"
        if rotation:
            stream.set_display_rotation(rotation)
        if sar:
            stream.codec_context.sample_aspect_ratio = sar
        for i in range(frames):
            for packet in stream.encode(timed_frame(hw, i, rate, start)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    with av.open(str(path)) as container:
        return [(p.pos, p.size) for p in container.demux(container.streams.video[0]) if p.size]


def colour_bands(h: int, w: int) -> np.ndarray:
    """Three saturated bands, red, green and blue, left to right: where YUV matrices differ most."""
    rgb = np.zeros((h, w, 3), np.uint8)
    rgb[:, : w // 3], rgb[:, w // 3: 2 * w // 3], rgb[:, 2 * w // 3:] = (230, 30, 30), (30, 200, 40), (40, 60, 220)
    return rgb


def pq_signal(nits: np.ndarray) -> np.ndarray:
    """SMPTE ST 2084's inverse EOTF: light in cd/m² -> PQ signal in 0..1."""
    m1, m2, c1, c2, c3 = 0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875
    y = np.power(nits / 10000, m1)
    return np.power((c1 + c2 * y) / (1 + c3 * y), m2)


def make_hdr_video(path: Path, rgb: np.ndarray, transfer: int, frames: int = 2) -> None:
    """A 10-bit HEVC video (lossless, 4:2:0, BT.2020) whose frames show the sRGB picture ``rgb`` on an HDR screen,
    as a phone records it: its light with SDR white at 203 cd/m², in BT.2020 primaries, through the PQ or the HLG
    curve (HLG: the BT.2100 inverse OOTF for a 1000 cd/m² display first)."""
    from depthport import tone_map

    v = rgb.astype(np.float32) / 255
    linear = np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4) @ np.array(
        [[0.6274, 0.3293, 0.0433], [0.0691, 0.9195, 0.0114], [0.0164, 0.0880, 0.8956]], np.float32).T
    nits = linear * tone_map.REFERENCE_WHITE
    if transfer == tone_map.PQ:
        signal = pq_signal(nits)
    else:
        display = nits / tone_map.HLG_PEAK
        scene = display * np.power(np.maximum(display @ tone_map._BT2020_LUMA, 1e-9), -0.2 / 1.2)[..., None]
        a, b, c = 0.17883277, 0.28466892, 0.55991073
        signal = np.where(scene <= 1 / 12, np.sqrt(3 * scene), a * np.log(np.maximum(12 * scene - b, 1e-9)) + c)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx265", rate=25)
        stream.height, stream.width = rgb.shape[:2]
        stream.pix_fmt = "yuv420p10le"
        context = stream.codec_context
        context.color_primaries, context.color_trc, context.colorspace, context.color_range = 9, transfer, 9, 1
        # no B-frames and one frame thread: x265 then puts out each frame as one packet in order, every time (with
        # its defaults the first packet's decode time came after its presentation time now and then, which the
        # muxers refuse: 'Invalid argument', 'Not yet implemented')
        stream.options = {"x265-params": "log-level=error:lossless=1:bframes=0:frame-threads=1"}
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(signal, np.float32), format="gbrpf32le")
        frame = frame.reformat(format="yuv420p10le", dst_colorspace=9, dst_color_range=1)
        for i in range(frames):
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.mark.parametrize("hw, matrix", [((720, 1280), "bt709"), ((480, 640), "smpte170m")])
def test_a_video_that_does_not_name_its_colour_matrix_is_read_with_the_one_players_assume(tmp_path, hw, matrix):
    """A video whose YUV matrix is not tagged: players (mpv) take BT.709 for HD and BT.601 for SD; swscale
    took BT.601 for all, and an untagged HD video's saturated colours came out 11-12 levels off (mean) of what a
    player shows."""
    from depthport.predict_inputs import sdr_image

    rgb = colour_bands(*hw)
    with av.open(str(tmp_path / "untagged.mp4"), "w") as container:
        stream = container.add_stream("libx264", rate=10, options={"qp": "0"})
        stream.height, stream.width = hw
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame = frame.reformat(format="yuv420p", dst_colorspace="itu709" if matrix == "bt709" else "itu601")
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    with av.open(str(tmp_path / "untagged.mp4")) as container:
        decoded = next(container.decode(video=0))
    assert decoded.colorspace == 2  # unspecified
    assert np.abs(np.asarray(sdr_image(decoded)).astype(int) - rgb).mean() < 1.5


def test_the_depth_video_names_its_colour_matrix_and_shows_its_colours(tmp_path):
    """The depth video was converted to YUV by swscale's default (BT.601) and not tagged: at HD a player takes
    BT.709 and showed the colour map's colours 11-12 levels off (mean). Now converted with BT.709, and tagged so."""
    from depthport.predict_inputs import Inputs, sdr_image
    from depthport.predict_many import _DepthVideo

    picture = colour_bands(720, 1280)
    with _DepthVideo(tmp_path / "depth.mp4", ".mp4", Inputs("video", "clip.mp4", [])) as video:
        for i in range(2):
            video.add(Image.fromarray(picture), i / 25)
    with av.open(str(tmp_path / "depth.mp4")) as container:
        frame = next(container.decode(video=0))
    assert (frame.colorspace, frame.color_primaries, frame.color_trc, frame.color_range) == (1, 1, 1, 1)
    assert np.abs(np.asarray(sdr_image(frame)).astype(int) - picture).mean() < 1.5


@pytest.mark.parametrize("transfer", ["HLG", "PQ"])
def test_an_hdr_video_is_tone_mapped_as_a_player_shows_it(tiny_tflite, tmp_path, capsys, transfer):
    """A phone's HDR video (an iPhone records HLG by default, other phones PQ) is read in the SDR colours a player
    shows on an ordinary screen, within HEVC's 4:2:0 error and the highlights' roll-off of the picture it was made
    from (mean 4.0-4.2 levels here); read as SDR (what swscale gives) its frames came out flat and grey (HLG, 33
    levels off) or dark (PQ, 55)."""
    from depthport import tone_map

    code = {"HLG": tone_map.HLG, "PQ": tone_map.PQ}[transfer]
    source = heic_source()
    path = tmp_path / ("IMG_0001.MOV" if transfer == "HLG" else "PXL_0001.mp4")  # an iPhone's, an Android phone's
    make_hdr_video(path, source, code)
    inputs = open_inputs(path)
    first = next(inputs.items()).image
    assert np.abs(np.asarray(first).astype(int) - source).mean() < 6
    assert inputs.hdr == transfer
    assert np.abs(np.asarray(decoded(path)[0]).astype(int) - source).mean() > 15  # the test sees the failure
    out, _ = ok(capsys, ["predict", tiny_tflite, path, "-o", tmp_path / "d.mp4"])
    assert f"HDR video ({transfer}): its frames tone-mapped to SDR, as a player shows them on an ordinary screen" in out
    with native_stderr_muted():
        assert np.array_equal(np.load(tmp_path / "d.npy")[0], Predictor(tiny_tflite).depth(first))
    make_video(tmp_path / "sdr.mp4", 2)
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "sdr.mp4", "-o", tmp_path / "s.mp4"])
    assert "HDR" not in out and open_inputs(tmp_path / "sdr.mp4").hdr is None


def test_tone_mapping_keeps_sdr_white_and_rolls_highlights_off_below_it():
    """Black is black and light below 80 % of diffuse white (203 cd/m²) keeps its SDR value; from there on light
    (PQ up to 10,000 cd/m², HLG's peak) rolls off monotonically towards white without reaching it, so highlights
    keep their order and nothing clips (diffuse white itself at 90 % linear, 244 of 255)."""
    from depthport import tone_map

    nits = np.array([0, 1, 50, 150, 203, 400, 1000, 4000, 10000], np.float32)
    grey = np.repeat(pq_signal(nits)[None, :, None], 3, axis=2)
    shown = tone_map.to_sdr(grey, tone_map.PQ)[0, :, 0].astype(int)
    assert shown[0] == 0 and np.all(np.diff(shown) >= 0) and shown[-1] <= 255
    assert 222 <= shown[3] <= 225 and 240 <= shown[4] < shown[5] < shown[6]  # 150 cd/m²: 0.74 of white, sRGB 224
    hlg = tone_map.to_sdr(np.array([[[0.0] * 3, [0.75] * 3, [1.0] * 3]], np.float32), tone_map.HLG)[0, :, 0]
    assert hlg[0] == 0 and 240 <= hlg[1] < hlg[2]  # HLG's 75 % signal is diffuse white (BT.2408)


def decoded(path: Path) -> list[Image.Image]:
    with av.open(str(path)) as container:
        return [frame.to_image() for frame in container.decode(video=0)]


def test_video_gives_a_depth_video_a_stack_and_timestamps(tiny_tflite, tmp_path, capsys):
    make_video(tmp_path / "clip.mp4", 6)
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "clip.mp4", "-o", tmp_path / "d.mp4"])
    assert "6 frames, 0 skipped" in out
    stack = np.load(tmp_path / "d.npy")
    assert stack.dtype == np.float32 and stack.shape == (6, 48, 64)
    with av.open(str(tmp_path / "d.mp4")) as container:
        stream = container.streams.video[0]
        assert stream.average_rate == 25 and stream.codec_context.name == "h264"
        frames = list(container.decode(stream))
    assert len(frames) == 6 and (frames[0].width, frames[0].height) == (64, 48)
    assert [f.time for f in frames] == pytest.approx([i / 25 for i in range(6)])
    stamps = json.loads((tmp_path / "d.timestamps.json").read_text())
    assert stamps["frame"] == list(range(6)) and stamps["time_s"] == pytest.approx([i / 25 for i in range(6)])
    assert stamps["fps"] == 25 and stamps["skipped"] == [] and stamps["stack"] == "d.npy"
    with native_stderr_muted():
        predictor = Predictor(tiny_tflite)
        for row, image in zip(stack, decoded(tmp_path / "clip.mp4")):  # in order, each its own frame's depth
            assert np.array_equal(row, predictor.depth(image))



@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_a_held_last_frame_and_far_apart_frames_keep_the_videos_length(tiny_tflite, tmp_path, capsys, suffix):
    """A screen recording: frames at 10 fps, two far apart, and the last one held on screen until 6 s (its packet's
    duration, as recorders write). The depth video ended at the last frame (1.4 s in the container's own words: with
    B-frames an MP4 lasted until its last decoding time, and the held frame's time was lost) and the summary called
    the whole file truncated; now it lasts the source's 6 s, every frame at its time, without that note."""
    times = [i / 10 for i in range(10)] + [2.5, 4.0]
    with av.open(str(tmp_path / "screen.mp4"), "w") as container:
        stream = container.add_stream("libx264", rate=10, options={"bf": "0"})
        stream.height, stream.width, stream.pix_fmt = 48, 64, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 1000)
        packets = []
        for i, t in enumerate(times):
            frame = av.VideoFrame.from_image(photo(48, 64, seed=i)).reformat(format="yuv420p")
            frame.pts, frame.time_base = round(t * 1000), Fraction(1, 1000)
            packets += stream.encode(frame)
        packets += stream.encode()
        packets[-1].duration = 2000
        for packet in packets:
            container.mux(packet)
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "screen.mp4", "-o", tmp_path / f"d{suffix}"])
    assert out.startswith("12 frames, 0 skipped") and "truncated" not in out, out
    with av.open(str(tmp_path / f"d{suffix}")) as container:
        length = container.duration / 1e6
        stream = container.streams.video[0]
        shown = [float(f.time) for f in container.decode(stream)]
    assert shown == pytest.approx(times, abs=1e-3) and length == pytest.approx(6.0, abs=0.02)
    if suffix == ".mp4":
        assert float(stream.duration * stream.time_base) == pytest.approx(6.0, abs=0.02)


def test_a_video_saved_without_its_suffix_is_read_as_a_video(tiny_tflite, tmp_path, capsys):
    """A video whose name says nothing (no suffix, .bin, .download) is known by its first bytes (MP4, QuickTime,
    Matroska): it was read as an image, 'not an image format Pillow can read'. A photo without a suffix, an AVIF
    one (whose ftyp box is an image's) included, is still a photo."""
    for made, saved in (("a.mp4", "clip"), ("b.mov", "IMG_0003.bin"), ("c.mkv", "c.download")):
        make_video(tmp_path / made, 2)
        (tmp_path / made).rename(tmp_path / saved)
        out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / saved, "-o", tmp_path / "out" / f"{saved}.mp4"])
        assert out.startswith("2 frames, 0 skipped, ") and np.load(tmp_path / "out" / f"{saved}.npy").shape == (2, 48, 64)
    photo().save(tmp_path / "photo", format="AVIF")
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "photo", "-o", tmp_path / "photo.png"])
    assert out.startswith(f"wrote {tmp_path / 'photo.png'}: depth 60x40")  # W x H, as every size in the output
    found = open_inputs(f"{tmp_path}/*")  # in a pattern too: three videos and two images, so its videos
    assert found.kind == "videos" and found.names == ["IMG_0003.bin", "c.download", "clip"]
    assert found.stills == ["photo", "photo.png"]


def test_an_empty_video_or_one_without_frames_says_so(tiny_tflite, tmp_path, capsys):
    """A 0-byte .mp4 (a download that did not start) was 'Invalid data found ... (damaged, or cut short ...)', and a
    Matroska header with no frame a bare 'End of file'; both say what they are now, nothing written."""
    (tmp_path / "empty.mp4").write_bytes(b"")
    with av.open(str(tmp_path / "header.mkv"), "w") as container:
        stream = container.add_stream("mjpeg", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuvj420p"
        container.start_encoding()
    for name, said in (("empty.mp4", "the file is empty (a copy or download that did not start?)"),
                       ("header.mkv", "End of file (it ends before its first frame)")):
        assert main(["predict", str(tiny_tflite), str(tmp_path / name), "-o", str(tmp_path / "d.mp4")]) == 2
        assert f"cannot read video {tmp_path / name}: {said}" in capsys.readouterr().err
    assert not (tmp_path / "d.mp4").exists()


def test_an_image_saved_under_a_videos_name_says_so(tiny_tflite, tmp_path, capsys):
    """A PNG named .mp4 or a WebP named .mkv: FFmpeg reads it as a one-frame video, and predict wrote a depth video of
    one frame; it says what the file is, as a video named .jpg does."""
    photo().save(tmp_path / "shot.mp4", format="PNG")
    photo().save(tmp_path / "shot.mkv", format="WEBP")
    for name, form, renamed in (("shot.mp4", "PNG", "shot.png"), ("shot.mkv", "WEBP", "shot.webp")):
        assert main(["predict", str(tiny_tflite), str(tmp_path / name), "-o", str(tmp_path / "d.mp4")]) == 2
        assert (f"cannot read video {tmp_path / name}: an image ({form}), not a video: rename it {renamed}, and "
                "predict writes its depth map") in capsys.readouterr().err
    assert not (tmp_path / "d.mp4").exists() and not (tmp_path / "d.npy").exists()


def test_the_video_read_is_the_largest_stream_and_never_cover_art(tiny_tflite, tmp_path, capsys):
    """FFmpeg lists an MP4 song's cover art as a one-frame video stream: predict wrote a one-frame depth video of it
    and called the song truncated ('the video ends at 0.0 s of the 1.1 s its header declares'). Of two video streams
    (a preview beside the recording) the one with the most pixels is read, as ffmpeg chooses: the first was."""
    with av.open(str(tmp_path / "song.mp4"), "w") as container:
        cover, sound = container.add_stream("mjpeg", rate=1), container.add_stream("aac", rate=48000, layout="mono")
        cover.height, cover.width, cover.pix_fmt = 32, 32, "yuvj420p"
        cover.disposition = av.stream.Disposition.attached_pic
        container.mux(cover.encode(av.VideoFrame.from_image(photo(32, 32))))
        for i in range(20):
            samples = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            samples.sample_rate, samples.pts = 48000, i * 1024
            container.mux(sound.encode(samples))
        container.mux(sound.encode())
    assert main(["predict", str(tiny_tflite), str(tmp_path / "song.mp4"), "-o", str(tmp_path / "d.mp4")]) == 2
    assert "song.mp4 has no video stream (its only picture is cover art, an audio file's)" in capsys.readouterr().err
    assert not (tmp_path / "d.mp4").exists() and not (tmp_path / "d.npy").exists()
    with av.open(str(tmp_path / "two.mkv"), "w") as container:
        streams = [container.add_stream("mjpeg", rate=25) for _ in range(2)]
        for stream, (h, w) in zip(streams, ((24, 32), (48, 64))):
            stream.height, stream.width, stream.pix_fmt = h, w, "yuvj420p"
        for i in range(6):  # the small one 6 frames, the large one 4
            for stream in streams if i < 4 else streams[:1]:
                container.mux(stream.encode(timed_frame((stream.height, stream.width), i)))
        container.mux([*streams[0].encode(), *streams[1].encode()])
    assert open_inputs(tmp_path / "two.mkv").stored_wh == (64, 48)
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "two.mkv", "-o", tmp_path / "t.mp4"])
    assert out.startswith("4 frames, 0 skipped") and np.load(tmp_path / "t.npy").shape == (4, 48, 64)


def test_a_video_into_a_folder_takes_the_videos_name(tiny_tflite, tmp_path, capsys):
    """-o or --npy naming a folder (one that exists, or a path ending in '/') puts NAME.mp4, or NAME.npy and its
    timestamps, in it, as for one image; a name that is neither a video (or .npy) file nor a folder says both ways
    (--npy said the file form only)."""
    make_video(tmp_path / "IMG_0002.MOV", 3)
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "IMG_0002.MOV", "-o", f"{tmp_path / 'new'}/"])
    assert out.startswith(f"3 frames, 0 skipped, ") and out.rstrip().endswith(
        f"wrote {tmp_path / 'new' / 'IMG_0002.mp4'}, {tmp_path / 'new' / 'IMG_0002.npy'} and "
        f"{tmp_path / 'new' / 'IMG_0002.timestamps.json'}")
    (tmp_path / "there").mkdir()
    ok(capsys, ["predict", tiny_tflite, tmp_path / "IMG_0002.MOV", "-o", tmp_path / "there", "--npy", tmp_path / "new"])
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.suffix != ".MOV") == [
        "new", "new/IMG_0002.mp4", "new/IMG_0002.npy", "new/IMG_0002.timestamps.json", "there", "there/IMG_0002.mp4"]
    with av.open(str(tmp_path / "there" / "IMG_0002.mp4")) as container:
        assert len(list(container.decode(video=0))) == 3
    assert main(["predict", str(tiny_tflite), str(tmp_path / "IMG_0002.MOV"), "-o", str(tmp_path / "depth")]) == 2
    assert f"give -o NAME.mp4, or a folder to put IMG_0002.mp4 in ({tmp_path / 'depth'}/)" in capsys.readouterr().err
    assert main(["predict", str(tiny_tflite), str(tmp_path / "IMG_0002.MOV"), "--npy", str(tmp_path / "stack")]) == 2
    assert f"give --npy NAME.npy, or a folder to put IMG_0002.npy in ({tmp_path / 'stack'}/)" in capsys.readouterr().err

def test_camcorder_and_old_phone_videos_are_read_as_videos(tiny_tflite, tmp_path, capsys):
    """A camcorder's AVCHD .MTS (H.264 in MPEG-TS), an old phone's .3gp (MPEG-4 Part 2) and a Raspberry Pi camera's
    raw H.264 stream (.h264, at the rate its own header states: FFmpeg's demuxer says 25) are videos, given alone or
    in a folder (they were read as images: 'not an image format Pillow can read', and left out of folders)."""
    for name, form, codec in (("00001.MTS", "mpegts", "libx264"), ("VID_0001.3gp", "3gp", "mpeg4"),
                              ("pi.h264", "h264", "libx264")):
        with av.open(str(tmp_path / name), "w", format=form) as container:
            stream = container.add_stream(codec, rate=25 if form != "h264" else 30)
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
            for i in range(3):
                for packet in stream.encode(av.VideoFrame.from_image(photo(48, 64, seed=i))):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / name, "-o", tmp_path / "out" / f"{name}.mp4"])
        assert out.startswith("3 frames, 0 skipped, ")
        assert np.load(tmp_path / "out" / f"{name}.npy").shape == (3, 48, 64)
    assert json.loads((tmp_path / "out" / "pi.h264.timestamps.json").read_text())["time_s"] == pytest.approx(
        [0, 1 / 30, 2 / 30])
    assert open_inputs(tmp_path).names == ["00001.MTS", "VID_0001.3gp", "pi.h264"]


def test_a_video_whose_stack_the_disk_cannot_hold_is_refused_and_a_full_disk_leaves_nothing(
        tiny_tflite, tmp_path, capsys, monkeypatch):
    """The stack's size is known at the first frame (frames x H x W x 4 bytes): more than the disk has free is
    refused then. A disk that fills anyway (ENOSPC) is one line, and none of the three outputs is left."""
    import errno
    import shutil

    from depthport import predict_many

    make_video(tmp_path / "clip.mp4", 6)
    out = tmp_path / "out"
    out.mkdir()
    usage = shutil.disk_usage(out)
    monkeypatch.setattr(predict_many.shutil, "disk_usage", lambda path: usage._replace(free=6 * 48 * 64 * 4 - 1))
    capsys.readouterr()
    assert main(["predict", str(tiny_tflite), str(tmp_path / "clip.mp4"), "-o", str(out / "d.mp4")]) == 2
    err = capsys.readouterr().err
    assert f"the depth stack {out / 'd.npy'} of 6 frames at 64x48 (float32) takes 0.0 GB" in err
    assert "give --npy PATH on a disk with room, or --model-size" in err and list(out.iterdir()) == []
    # Matroska and WebM (OBS's and browsers' screen recordings) write no frame count: the declared duration times
    # the rate stands for it, for the progress bar's frames n/N and time left, and for this check (it was skipped)
    make_video(tmp_path / "screen.mkv", 6)
    assert main(["predict", str(tiny_tflite), str(tmp_path / "screen.mkv"), "-o", str(out / "s.mp4")]) == 2
    assert f"the depth stack {out / 's.npy'} of about 6 frames at 64x48 (float32)" in capsys.readouterr().err
    assert list(out.iterdir()) == []
    assert (open_inputs(tmp_path / "screen.mkv").total, open_inputs(tmp_path / "screen.mkv").total_estimated) == (
        6, True)
    assert not open_inputs(tmp_path / "clip.mp4").total_estimated
    monkeypatch.setattr(predict_many.shutil, "disk_usage", lambda path: usage._replace(free=6 * 48 * 64 * 4))
    write = predict_many._Stack.add

    def disk_fills(self, depth):
        if self.count == 3:
            raise OSError(errno.ENOSPC, "No space left on device", self.fh.name)
        write(self, depth)

    monkeypatch.setattr(predict_many._Stack, "add", disk_fills)
    assert main(["predict", str(tiny_tflite), str(tmp_path / "clip.mp4"), "-o", str(out / "d.mp4")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("depthport predict: error: no space left on the disk writing ") and len(err.splitlines()) == 1
    assert "outputs are written whole or not at all" in err and list(out.iterdir()) == []


def test_a_depth_npy_that_does_not_fit_fails_with_its_errno_and_leaves_nothing(tmp_path):
    """A full disk while writing a photo's --npy gave a traceback: np.save writes with the C library, whose OSError
    has no errno ('120000 requested and 59360 written'), so the one line for a full disk (ENOSPC) never showed. Its
    data now goes through Python's write, whose error has the errno; here a file-size limit stands in for the full
    disk (EFBIG), in a child process. The pair is written whole or not at all."""
    import errno

    script = ("import resource, signal, sys; import numpy as np; from PIL import Image; "
              "from depthport.predict import write_depth; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
              "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000)); out = sys.argv[1]\n"
              "try:\n    write_depth(np.ones((100, 100)), Image.new('RGB', (10, 10)), out + '/d.png', out + '/d.npy')\n"
              "except OSError as exc:\n    print(exc.errno)")
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == str(errno.EFBIG), run.stdout + run.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []
    write_depth(np.arange(12, dtype=np.float64).reshape(3, 4), Image.new("RGB", (4, 3)), tmp_path / "d.png",
                tmp_path / "d.npy")
    assert np.array_equal(np.load(tmp_path / "d.npy"), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_the_bar_shows_an_estimated_frame_count_as_one():
    """Matroska writes no frame count: the bar's total is the declared duration times the frame rate, which a
    variable frame rate makes far off (120 frames shown as 0/1831 all the way); such a total is shown as '~1831'."""
    from io import StringIO

    from rich.console import Console

    from depthport.cli.progress import item_progress

    for estimated, shown in ((True, "2/~5"), (False, "2/5")):
        text = StringIO()
        with item_progress(Console(file=text, force_terminal=True, no_color=True, width=100), "frames", 5,
                           estimated) as bar:
            bar.advance("frame 0")
            bar.advance("frame 1")
        assert f" {shown} " in text.getvalue() and ("~" in text.getvalue()) is estimated, text.getvalue()


def test_a_truncated_video_says_where_it_ends_against_its_header(tiny_tflite, tmp_path, capsys):
    """A copy or download cut short decodes to its last whole frame; the summary and timestamps.json say that the
    video ends before the end its header declares (a whole video says nothing, also one whose first frame is not at
    0 s: a Matroska segment's declared duration counts from 0 s, which was taken as counting from the first frame;
    also one whose sound lasts longer than its video: a Matroska segment lasts as long as its longest track). An MP4
    cut before its index cannot be read: that is said (it said only FFmpeg's 'Invalid data found ...')."""
    make_video(tmp_path / "whole.mkv", 50)  # 2 s at 25 fps
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "whole.mkv", "-o", tmp_path / "w.mp4"])
    assert out.startswith("50 frames, 0 skipped, ") and "header" not in out
    assert json.loads((tmp_path / "w.timestamps.json").read_text())["declared_end_s"] == pytest.approx(2.0)
    make_video(tmp_path / "later.mkv", 50, start=50)  # from 2 s to 4 s
    assert open_inputs(tmp_path / "later.mkv").total == 50
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "later.mkv", "-o", tmp_path / "l.mp4"])
    assert out.startswith("50 frames, 0 skipped, ") and "header" not in out
    assert json.loads((tmp_path / "l.timestamps.json").read_text())["declared_end_s"] == pytest.approx(4.0)
    with av.open(str(tmp_path / "sound.mkv"), "w") as container:  # 1 s of video, 2.4 s of sound (a segment of 2.4 s)
        video, audio = container.add_stream("mjpeg", rate=25), container.add_stream("mp2", rate=48000, layout="mono")
        video.height, video.width, video.pix_fmt = 48, 64, "yuvj420p"
        for i in range(25):
            container.mux(video.encode(timed_frame((48, 64), i)))
        for i in range(100):
            sound = av.AudioFrame.from_ndarray(np.zeros((1, 1152), np.int16), format="s16", layout="mono")
            sound.sample_rate, sound.pts = 48000, i * 1152
            container.mux(audio.encode(sound))
        container.mux([*video.encode(), *audio.encode()])
    assert open_inputs(tmp_path / "sound.mkv").total == 25
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "sound.mkv", "-o", tmp_path / "s.mp4"])
    assert out.startswith("25 frames, 0 skipped, ") and "header" not in out
    data = (tmp_path / "whole.mkv").read_bytes()
    (tmp_path / "cut.mkv").write_bytes(data[: len(data) // 2])
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "cut.mkv", "-o", tmp_path / "c.mp4"])
    stamps = json.loads((tmp_path / "c.timestamps.json").read_text())
    seen = len(stamps["frame"]) + len(stamps["skipped"])
    assert 10 < seen < 40 and f"{seen} frames, " in out
    assert f"the video ends at {seen / 25:.1f} s of the 2.0 s its header declares (a truncated file?)" in out
    assert stamps["ends_early"] in out
    make_video(tmp_path / "whole.mp4", 50)  # an MP4 writes its index (moov) after its frames: cut, it has none
    data = (tmp_path / "whole.mp4").read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[: len(data) // 2])
    capsys.readouterr()
    assert main(["predict", str(tiny_tflite), str(tmp_path / "cut.mp4"), "-o", str(tmp_path / "m.mp4")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"depthport predict: error: cannot read video {tmp_path / 'cut.mp4'}: Invalid data found when processing "
        "input (damaged, or cut short: a copy or download that stopped part-way? An MP4 or MOV often keeps its "
        "index at its end)")


def test_video_frames_are_turned_upright(tiny_tflite, tmp_path, capsys):
    """A display rotation of 90 degrees (counter-clockwise, as a phone's portrait video): depth is 64 high."""
    make_video(tmp_path / "turned.mp4", 2, rotation=90)
    ok(capsys, ["predict", tiny_tflite, tmp_path / "turned.mp4", "-o", tmp_path / "d.mkv", "--npy",
                tmp_path / "stack.npy"])
    stack = np.load(tmp_path / "stack.npy")
    assert stack.shape == (2, 64, 48) and (tmp_path / "stack.timestamps.json").is_file()
    with native_stderr_muted():
        first = Predictor(tiny_tflite).depth(decoded(tmp_path / "turned.mp4")[0].transpose(Image.Transpose.ROTATE_90))
    assert np.array_equal(stack[0], first)
    with av.open(str(tmp_path / "d.mkv")) as container:
        assert (container.streams.video[0].width, container.streams.video[0].height) == (48, 64)


def test_non_square_pixels_are_read_at_the_shape_players_show(tiny_tflite, tmp_path, capsys):
    """A camcorder's HDV or AVCHD clip stores 1440x1080 with 4:3 pixels and players show 1920x1080: its frames are
    widened to that shape before the depth (they were read squeezed, 64 wide for 96 here), then turned upright,
    and the summary says so. The depth video has square pixels at that shape."""
    make_video(tmp_path / "hdv.mkv", 2, sar=Fraction(3, 2))
    make_video(tmp_path / "hdv_turned.mp4", 2, sar=Fraction(3, 2), rotation=90)
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "hdv.mkv", "-o", tmp_path / "d.mp4"])
    assert "its 64x48 frames have non-square pixels (sample aspect ratio 3:2): read at 96x48, as players show " \
           "them" in out
    stack = np.load(tmp_path / "d.npy")
    assert stack.shape == (2, 48, 96)
    with native_stderr_muted():
        wide = decoded(tmp_path / "hdv.mkv")[0].resize((96, 48), Image.Resampling.BICUBIC)
        assert np.array_equal(stack[0], Predictor(tiny_tflite).depth(wide))
    with av.open(str(tmp_path / "d.mp4")) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (96, 48) and stream.sample_aspect_ratio in (None, 0, 1)
    ok(capsys, ["predict", tiny_tflite, tmp_path / "hdv_turned.mp4", "-o", tmp_path / "t.mp4"])
    assert np.load(tmp_path / "t.npy").shape == (2, 96, 48)  # widened as stored, then turned
    from depthport.predict_inputs import square_pixels

    assert square_pixels(wide, None) is wide
    make_video(tmp_path / "square.mkv", 2)
    out, _ = ok(capsys, ["predict", tiny_tflite, tmp_path / "square.mkv", "-o", tmp_path / "s.mp4"])
    assert "non-square" not in out and np.load(tmp_path / "s.npy").shape == (2, 48, 64)


def test_corrupt_frame_is_skipped_and_counted(tiny_tflite, tmp_path, capsys):
    """Frame 3's JPEG data overwritten in the file: the decoder refuses it; the other frames are kept in order."""
    path = tmp_path / "clip.mp4"
    pos, size = make_video(path, 6)[3]
    data = bytearray(path.read_bytes())
    data[pos:pos + size] = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))
    out, err = ok(capsys, ["predict", tiny_tflite, path, "-o", tmp_path / "d.mp4"])
    assert "6 frames, 1 skipped (frame 3: cannot decode: Invalid data" in out
    assert "skipped frame 3: cannot decode" in err
    stamps = json.loads((tmp_path / "d.timestamps.json").read_text())
    assert stamps["frame"] == [0, 1, 2, 4, 5] and stamps["skipped"][0]["frame"] == 3
    assert stamps["skipped"][0]["time_s"] == pytest.approx(3 / 25)
    assert np.load(tmp_path / "d.npy").shape == (5, 48, 64)
    with av.open(str(tmp_path / "d.mp4")) as container:
        assert len(list(container.decode(video=0))) == 5



def test_frames_keep_their_places_on_screen_when_a_b_frame_videos_reference_frame_does_not_decode(
        tiny_tflite, tmp_path, capsys):
    """H.264 with B-frames stores frame 6 before frames 4 and 5 (decoding order 0 3 1 2 6 4 5 ...): frame 6 not
    decoding was counted as frame 3 when it failed, and frames 3-5 as 4-6, their places in decoding order."""
    path = tmp_path / "clip.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10, options={
            "bf": "2", "g": "12", "threads": "1", "x264-params": "b-pyramid=none:scenecut=0:log-level=error"})
        stream.height, stream.width, stream.pix_fmt = 48, 64, "yuv420p"
        for i in range(12):
            for packet in (*stream.encode(timed_frame((48, 64), i, 10)), *(stream.encode() if i == 11 else ())):
                container.mux(packet)
    with av.open(str(path)) as container:
        stored = [(p.pts, p.pos) for p in container.demux(video=0) if p.size]
        step = container.streams.video[0].time_base * 10
    assert [round(pts * step) for pts, _ in stored][:7] == [0, 3, 1, 2, 6, 4, 5]
    data = bytearray(path.read_bytes())
    pos = stored[4][1]
    data[pos:pos + 4] = b"\x7f\xff\xff\xff"  # frame 6's NAL unit length: larger than the file
    path.write_bytes(bytes(data))
    out, err = ok(capsys, ["predict", tiny_tflite, path, "-o", tmp_path / "d.mp4"])
    assert "12 frames, 1 skipped (frame 6: cannot decode" in out and "skipped frame 6: cannot decode" in err
    stamps = json.loads((tmp_path / "d.timestamps.json").read_text())
    assert stamps["frame"] == [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11]
    assert stamps["time_s"] == pytest.approx([i / 10 for i in stamps["frame"]])
    assert [(s["frame"], s["time_s"]) for s in stamps["skipped"]] == [(6, pytest.approx(0.6))]



def test_a_frame_the_decoder_fills_in_is_skipped_as_damaged(tiny_tflite, tmp_path, capsys):
    """Bytes flipped inside H.264 frames' picture data: most of these packets decode, the decoder filling in the
    blocks it could not read (FFmpeg flags such a frame corrupt; a player shows the smear). Those frames were
    predicted and the summary said 0 skipped; now each is skipped as damaged, in its place, and counted. Which
    frames FFmpeg catches depends on the bytes: its own verdict, frame by frame, is what the output must say."""
    path, noise = tmp_path / "clip.mp4", np.random.default_rng(0)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10, options={
            "bf": "0", "g": "5", "threads": "1", "x264-params": "scenecut=0:log-level=error"})
        stream.height, stream.width, stream.pix_fmt = 48, 64, "yuv420p"
        for i in range(12):
            frame = av.VideoFrame.from_ndarray(noise.integers(0, 256, (48, 64, 3), dtype=np.uint8), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, 10)
            for packet in (*stream.encode(frame), *(stream.encode() if i == 11 else ())):
                container.mux(packet)
    with av.open(str(path)) as container:
        stored = [(p.pos, p.size) for p in container.demux(video=0) if p.size]
    data = bytearray(path.read_bytes())
    for pos, size in [stored[i] for i in (1, 2, 3, 4, 6, 7, 8, 9)]:  # predicted frames (key frames: 0, 5, 10)
        data[pos + size // 4:pos + size - 2] = bytes(b ^ 0xFF for b in data[pos + size // 4:pos + size - 2])
    path.write_bytes(bytes(data))
    damaged, failed = [], []
    with av.open(str(path)) as container:
        for packet in container.demux(video=0):
            try:
                damaged += [round(f.time * 10) for f in packet.decode() if f.is_corrupt]
            except av.error.FFmpegError:
                failed.append(round(packet.pts * packet.time_base * 10))
    assert damaged, "FFmpeg caught none of the flipped frames"
    out, err = ok(capsys, ["predict", tiny_tflite, path, "-o", tmp_path / "d.mp4"])
    skipped = sorted(damaged + failed)
    assert f"12 frames, {len(skipped)} skipped (frame {skipped[0]}, " in out
    assert all(f"skipped frame {i}: damaged: parts of it did not decode (the decoder filled them in)" in err
               for i in damaged)
    stamps = json.loads((tmp_path / "d.timestamps.json").read_text())
    assert stamps["frame"] == [i for i in range(12) if i not in skipped]
    assert [s["frame"] for s in stamps["skipped"]] == skipped


def test_a_metric_models_video_has_one_colour_scale_and_a_relative_ones_frames_their_own(tiny_tflite, tmp_path,
                                                                                          capsys):
    """A metric model's depth video: every frame coloured over one span of metres, the lowest 2nd to the highest 98th
    percentile of its frames, with that legend (each frame had its own, so a colour meant another distance in each
    frame), and the summary says the span. A relative model's frames keep their own span: its values have no unit."""
    from depthport.visualize import colorize, depth_range, with_colorbar

    def video_span(stack: np.ndarray) -> tuple[float, float]:
        spans = np.array([depth_range(d) for d in stack])
        return spans[:, 0].min(), spans[:, 1].max()

    path = tmp_path / "clip.mkv"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mjpeg", rate=10)
        stream.height, stream.width, stream.pix_fmt = 96, 128, "yuvj420p"
        for i in range(4):
            picture = np.asarray(photo(96, 128, seed=i)) * (0.3 if i % 2 else 1.0)  # dark frames: nearer here
            frame = av.VideoFrame.from_ndarray(picture.astype(np.uint8), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, 10)
            for packet in stream.encode(frame):
                container.mux(packet)

    def errors(out: Path, metric: bool) -> list[tuple[float, float]]:
        """Each output frame's mean difference from its depth coloured over the video's span, and over its own
        (libx264 at its default quality: ~5 levels from either picture it was made from)."""
        stack = np.load(out.with_suffix(".npy"))
        span = video_span(stack)
        with av.open(str(out)) as container:
            shown = [np.asarray(f.to_image(), dtype=float) for f in container.decode(video=0)]
        assert len(shown) == len(stack) == 4
        coloured = {name: [np.asarray(with_colorbar(colorize(d, lo=lo, hi=hi), lo, hi, "depth (m)") if metric else
                                      colorize(d, lo=lo, hi=hi), dtype=float)
                           for d, (lo, hi) in zip(stack, spans)]
                    for name, spans in (("video", [span] * 4), ("own", [depth_range(d) for d in stack]))}
        return [(np.abs(f - v).mean(), np.abs(f - o).mean()) for f, v, o in zip(shown, *coloured.values())]

    model = metric_file(tiny_tflite, tmp_path, METRES)
    out, _ = ok(capsys, ["predict", model, path, "-o", tmp_path / "metric.mp4"])
    lo, hi = video_span(np.load(tmp_path / "metric.npy"))
    assert "4 frames, 0 skipped" in out and f"one colour scale for the whole video, {lo:.3g}-{hi:.3g} m" in out
    assert all(video < 10 and video < own / 2 for video, own in errors(tmp_path / "metric.mp4", True))
    out, _ = ok(capsys, ["predict", tiny_tflite, path, "-o", tmp_path / "relative.mp4"])
    assert "colour scale" not in out
    assert all(own < 10 and own < video / 2 for video, own in errors(tmp_path / "relative.mp4", False))


def test_a_metric_videos_colouring_pass_is_counted_on_the_bar(tiny_tflite, tmp_path):
    """The metric video's colouring (after every frame's depth) moves the bar again, from 0 to its frames, where the
    bar stood full and still (a 1080p frame takes ~75 ms to colour and encode on one core); a relative video has no
    such pass."""
    from depthport.cli.predict import _colouring
    from depthport.predict_inputs import open_video
    from depthport.predict_many import Tally, predict_video

    make_video(tmp_path / "clip.mp4", 3)
    calls = {}
    for name, model in (("metric", metric_file(tiny_tflite, tmp_path, METRES)), ("relative", tiny_tflite)):
        calls[name] = []
        with native_stderr_muted():
            predictor = Predictor(model)
            predict_video(predictor, open_video(tmp_path / "clip.mp4"),
                          (tmp_path / f"{name}.mp4", tmp_path / f"{name}.npy", tmp_path / f"{name}.json"),
                          Tally("frames"), on_colour=lambda done, total, c=calls[name]: c.append((done, total)))
    assert calls == {"metric": [(0, 3), (1, 3), (2, 3), (3, 3)], "relative": []}
    bar = SimpleNamespace(log=[])
    bar.phase, bar.advance = (lambda *a: bar.log.append(("phase", *a))), (lambda: bar.log.append("advance"))
    on_colour = _colouring(bar)
    for done in range(4):
        on_colour(done, 3)
    assert bar.log == [("phase", "colouring the depth video", 3), "advance", "advance", "advance"]


def test_frames_that_change_size_keep_their_place_at_the_first_frames_size(tiny_tflite, tmp_path, capsys):
    """A screen recording whose window was resized: the frames of the second size were skipped, a line each, and the
    depth video lost them. Their depth is now at the first frame's size (a stack holds one size), the bicubic resize
    of the model's as for any frame, in its place, and the summary says so once; with --model-size every frame is at
    the model's, and nothing is said."""
    path = tmp_path / "resized.mkv"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mjpeg", rate=25)
        stream.height, stream.width, stream.pix_fmt = 48, 64, "yuvj420p"
        larger = av.CodecContext.create("mjpeg", "w")
        larger.height, larger.width, larger.pix_fmt, larger.time_base = 80, 96, "yuvj420p", Fraction(1, 25)
        for i in range(4):
            frame = timed_frame((48, 64) if i < 2 else (80, 96), i)
            for packet in (stream.encode(frame) if i < 2 else larger.encode(frame)):
                packet.stream = stream
                container.mux(packet)
    out, err = ok(capsys, ["predict", tiny_tflite, path, "-o", tmp_path / "d.mp4"])
    assert out.startswith("4 frames, 0 skipped") and "skipped" not in err
    assert ("; 2 frames (the first: frame 2) are 96x80, not the first frame's 64x48: their depth is resized to it (a stack "
            "holds one size; --model-size keeps every frame at the model's)") in out, out
    stack = np.load(tmp_path / "d.npy")
    with native_stderr_muted():
        predictor = Predictor(tiny_tflite, model_size=True)
        frames = decoded(path)
        assert [f.size for f in frames] == [(64, 48), (64, 48), (96, 80), (96, 80)] and stack.shape == (4, 48, 64)
        for row, image in zip(stack, frames):
            np.testing.assert_allclose(row, bicubic(predictor.depth(image), (48, 64)), atol=1e-5)
    out, _ = ok(capsys, ["predict", tiny_tflite, path, "-o", tmp_path / "m.mp4", "--model-size"])
    assert out.startswith("4 frames, 0 skipped") and "resized" not in out
    assert np.load(tmp_path / "m.npy").shape == (4, *TINY_HW)
    ok(capsys, ["predict", tiny_tflite, path, "-o", tmp_path / "lb.mp4", "--letterbox"])  # the frame's own padding
    with native_stderr_muted():
        padded = Predictor(tiny_tflite, letterbox=True, model_size=True).depth(frames[2])
    top, left, h, w = letterbox_box((80, 96), TINY_HW)  # the 96x80 frame's box: the first frame's kept its padding
    np.testing.assert_allclose(np.load(tmp_path / "lb.npy")[2], bicubic(padded[top:top + h, left:left + w], (48, 64)),
                               atol=1e-5)
    with av.open(str(tmp_path / "twice.mkv"), "w") as container:  # one picture, then the same at twice the size
        stream = container.add_stream("mjpeg", rate=25)
        stream.height, stream.width, stream.pix_fmt = 48, 64, "yuvj420p"
        larger = av.CodecContext.create("mjpeg", "w")
        larger.height, larger.width, larger.pix_fmt, larger.time_base = 96, 128, "yuvj420p", Fraction(1, 25)
        for i, codec in enumerate((stream, larger)):
            frame = av.VideoFrame.from_image(photo(48, 64).resize((64 * (i + 1), 48 * (i + 1)), Image.BICUBIC))
            frame.pts, frame.time_base = i, Fraction(1, 25)
            for packet in codec.encode(frame.reformat(format="yuvj420p")):
                packet.stream = stream
                container.mux(packet)
    ok(capsys, ["predict", metric_file(tiny_tflite, tmp_path, CANONICAL), tmp_path / "twice.mkv", "-o",
                tmp_path / "metres.mp4", "--focal", "60"])  # pixels of the first frame: the metres of one picture
    small, large = np.median(np.load(tmp_path / "metres.npy").reshape(2, -1), axis=1)
    assert abs(large / small - 1) < 0.05, (small, large)  # they doubled: --focal was taken in the frame's pixels


def test_a_frame_the_decoder_gives_out_of_order_is_skipped_not_written_back_in_time():
    """A damaged H.264 stream (a B-frame's data overwritten, which FFmpeg conceals without an error) gave the frame
    shown at pts 1 after those at 4, 8 and 9: it was a stack row with its time going backwards and a frame number
    after theirs."""
    from depthport.predict_inputs import _Places

    places, picture = _Places(Fraction(30)), Image.new("RGB", (4, 4))
    items = [places.item(pts, picture, None, Fraction(pts, 30)) for pts in (0, 4, 8, 9, 1, 10, 10)]
    assert [(i.index, i.error is None) for i in items] == [(0, True), (1, True), (2, True), (3, True), (4, False),
                                                           (5, True), (6, True)]  # equal times (pts 10 twice) kept
    assert items[4].image is None and "after frames shown later (a damaged stream)" in items[4].error
    assert items[4].time == pytest.approx(1 / 30)


# ------------------------------------------------------------------------------------------------ Ctrl-C
def interrupt_when(argv: list, ready, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the console script in a child; send it SIGINT (Ctrl-C) once ``ready()`` holds."""
    child = subprocess.Popen([sys.executable, "-c", ENTRY_CHILD, *map(str, argv)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while not ready() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert child.poll() is None, "the run ended before it could be interrupted"
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def test_ctrl_c_during_a_group_of_renames_takes_effect_after_it(tmp_path):
    """atomic_paths renames a PNG and its .npy under sigint_deferred: a real SIGINT inside waits for the end."""
    with pytest.raises(KeyboardInterrupt):
        with sigint_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # Python would have raised by now
            (tmp_path / "after").write_text("the block ran to its end")
    assert (tmp_path / "after").is_file()
    with pytest.raises(KeyboardInterrupt):
        with atomic_paths(tmp_path / "a.png", tmp_path / "a.npy") as (png, npy):
            png.write_text("png")
            npy.write_text("npy")
            raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["after"]


RACE = """
import os, random, signal, sys, threading, time
from pathlib import Path
from depthport.atomic import atomic_paths
folder, rng, interrupted = Path(sys.argv[1]), random.Random(0), 0
for i in range(300):
    timer = threading.Timer(rng.uniform(0, 0.002), os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        for j in range(50):
            with atomic_paths(folder / f"a{i}_{j}.png", folder / f"a{i}_{j}.npy") as (png, npy):
                png.write_bytes(b"png")
                npy.write_bytes(b"npy")
        time.sleep(0.01)
    except KeyboardInterrupt:
        interrupted += 1
    timer.join()
print(interrupted)
"""


def test_a_failed_write_removes_the_folders_made_for_it_and_only_those(tmp_path):
    """An output whose folders did not exist: when its write fails they go with it (they stayed, empty); a folder
    that was there, or that holds something else by then, stays; a write that succeeds keeps them."""
    from depthport.atomic import atomic_path

    (tmp_path / "kept").mkdir()
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "kept" / "new" / "deeper" / "d.png") as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("the write fails")
    assert [p.name for p in tmp_path.iterdir()] == ["kept"] and not list((tmp_path / "kept").iterdir())
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "a" / "b" / "d.png"):
        (tmp_path / "a" / "other.txt").write_text("written meanwhile by someone else")
        raise RuntimeError("the write fails")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["other.txt"]
    with atomic_path(tmp_path / "c" / "d" / "d.png") as tmp:
        tmp.write_bytes(b"whole")
    assert (tmp_path / "c" / "d" / "d.png").read_bytes() == b"whole"


def test_ctrl_c_at_any_instant_leaves_no_temporary_file_and_whole_pairs(tmp_path):
    """SIGINT at 300 random instants of a loop of atomic_paths (before, the creation of a temporary file could be
    interrupted before its removal was registered: 274 .part files were left in this loop)."""
    run = subprocess.run([sys.executable, "-c", RACE, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout) >= 250
    names = [p.name for p in tmp_path.iterdir()]
    assert not [n for n in names if n.startswith(".") or n.endswith(".part")]
    pngs, npys = {n[:-4] for n in names if n.endswith(".png")}, {n[:-4] for n in names if n.endswith(".npy")}
    assert pngs == npys and len(pngs) > 0


def test_ctrl_c_during_a_video_leaves_nothing_half_written(tiny_tflite, tmp_path):
    make_video(tmp_path / "long.mp4", 400, hw=(96, 128))
    out, stacks = tmp_path / "out", tmp_path / "stacks" / "day1"

    def frames_written() -> bool:  # the stack's temp file holds a few frames
        return any(p.name.startswith(".d.npy.") and p.stat().st_size > 4 * 96 * 128 * 4
                   for p in stacks.glob(".*.part")) if stacks.is_dir() else False

    run = interrupt_when(["predict", tiny_tflite, tmp_path / "long.mp4", "-o", out / "d.mp4", "--npy",
                          stacks / "d.npy"], frames_written)
    assert run.returncode == 130, run.stderr[-2000:]
    assert "depthport predict: interrupted after" in run.stderr and "nothing was written" in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.mp4"]  # the folders made for the outputs: gone too


def test_ctrl_c_during_a_folder_of_videos_keeps_the_finished_videos_whole(tiny_tflite, tmp_path):
    clips, out = tmp_path / "clips", tmp_path / "out"
    clips.mkdir()
    make_video(clips / "a.mp4", 3)
    make_video(clips / "b.mp4", 400, hw=(96, 128))

    def frames_written() -> bool:  # b's stack's temp file holds a few frames
        return any(p.name.startswith(".b.npy.") and p.stat().st_size > 4 * 96 * 128 * 4
                   for p in out.glob(".*.part")) if out.is_dir() else False

    run = interrupt_when(["predict", tiny_tflite, clips, "-o", out], frames_written)
    assert run.returncode == 130, run.stderr[-2000:]
    assert f"interrupted after 1 video, 0 skipped, 3 frames at " in run.stderr
    assert f"the 1 finished video's outputs in {out} are whole; the one in progress left nothing" in run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a.mp4", "a.npy", "a.timestamps.json"]
    assert np.load(out / "a.npy").shape == (3, 48, 64)

def test_ctrl_c_tears_the_runtime_down_while_its_messages_are_muted(tiny_tflite):
    """A Ctrl-C that lands inside Pillow's PNG writer interrupts an exception Pillow handles itself; that exception's
    frames held the loaded file past the muted block, so LiteRT's 'DestroyAccelerator' lines trailed the
    'interrupted after' line."""
    from depthport.cli.predict import _with_predictor

    loaded = []

    def work(predictor):
        loaded.append(weakref.ref(predictor))
        try:
            raise AttributeError("'_idat' object has no attribute 'fileno'")  # as Pillow's ImageFile._save
        except AttributeError:
            raise KeyboardInterrupt  # noqa: B904 (Ctrl-C arrives while Pillow handles its own exception)

    with pytest.raises(KeyboardInterrupt) as caught:
        _with_predictor(SimpleNamespace(file=tiny_tflite, verbose=False), work)
    gc.collect()
    assert caught.value and loaded and loaded[0]() is None  # gone while the caller still holds the Ctrl-C


def test_ctrl_c_during_a_folder_keeps_every_finished_image_whole(tiny_tflite, tmp_path):
    folder, out = tmp_path / "photos", tmp_path / "out"
    folder.mkdir()
    for i in range(150):
        photo(90, 120, seed=i).save(folder / f"p{i:03d}.png")
    run = interrupt_when(["predict", tiny_tflite, folder, "-o", out, "--npy"],
                         lambda: out.is_dir() and len(list(out.glob("*.npy"))) >= 3)
    assert run.returncode == 130, run.stderr[-2000:]
    assert "interrupted after" in run.stderr and "are whole" in run.stderr
    names = sorted(p.name for p in out.iterdir())
    assert not [n for n in names if n.startswith(".") or n.endswith(".part")]
    pngs, npys = [n for n in names if n.endswith(".png")], [n for n in names if n.endswith(".npy")]
    assert 3 <= len(pngs) < 150 and [n[:-4] for n in pngs] == [n[:-4] for n in npys]
    assert pngs == [f"p{i:03d}.png" for i in range(len(pngs))]  # in order
    for png in pngs:
        assert np.load(out / png.replace(".png", ".npy")).shape == (90, 120)
        with Image.open(out / png) as picture:
            picture.load()
            assert picture.size == (120, 90)
