"""`depthport predict` as image tools do it: the photo as a viewer shows it (EXIF orientation, colour profile,
colour forms) and depth at the photo's size (bicubic, as transformers resizes it).

Everything runs on the session's tiny LiteRT export (56x70) and images made here."""

from __future__ import annotations

import json
import os
import signal
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageCms

from depthport.atomic import atomic_paths, sigint_deferred
from depthport.cli import main
from depthport.core.images import folder_set
from depthport.predict import Predictor
from depthport.preprocess import letterbox_box, load_image
from depthport.quiet import native_stderr_muted
from depthport.spec import CANONICAL, METRES, output_units

from helpers import TINY_HW

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


def single(capsys, model, image: Path, out: Path, *extra, bar: bool = False) -> np.ndarray:
    """The depth of one image through the command line (.npy beside the PNG); checks the PNG has its size (and,
    with ``bar``, a colour bar beside it)."""
    ok(capsys, ["predict", model, image, "-o", out.with_suffix(".png"), "--npy", out.with_suffix(".npy"), *extra])
    depth = np.load(out.with_suffix(".npy"))
    width, height = Image.open(out.with_suffix(".png")).size
    assert height == depth.shape[0] and (width > depth.shape[1] if bar else width == depth.shape[1])
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


def swapped_profile() -> bytes:
    """sRGB with the red and blue primaries exchanged: a real, non-sRGB RGB profile (LittleCMS's own sRGB,
    its rXYZ and bXYZ tag entries swapped)."""
    data = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    count = struct.unpack(">I", data[128:132])[0]
    entries = {bytes(data[132 + 12 * i:136 + 12 * i]): 132 + 12 * i for i in range(count)}
    r, b = entries[b"rXYZ"], entries[b"bXYZ"]
    data[r + 4:r + 12], data[b + 4:b + 12] = data[b + 4:b + 12], data[r + 4:r + 12]
    return bytes(data)


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


def test_a_multi_frame_file_gives_its_first_frame(tmp_path):
    frames = [Image.new("RGB", (20, 10), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=100)
    assert getattr(Image.open(tmp_path / "anim.gif"), "n_frames", 1) == 2
    assert load_image(tmp_path / "anim.gif").getpixel((5, 5)) == (255, 0, 0)


# ------------------------------------------------------------------------------------------------ the size
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


@pytest.mark.parametrize("meaning", [METRES, CANONICAL])
def test_metric_depth_stays_in_metres_at_the_photos_size(tiny_tflite, tmp_path, capsys, meaning):
    """Resizing does not rescale values: the photo-size metres are the bicubic resize of the model-size metres,
    which are the raw output (times focal x scale / 300 for canonical depth, at the input size)."""
    folder = tmp_path / "export"
    folder.mkdir()
    model = folder / "metric.tflite"
    model.write_bytes(Path(tiny_tflite).read_bytes())
    units = output_units(meaning, 20.0) if meaning == METRES else output_units(meaning, focal_reference=300.0)
    (folder / "report.json").write_text(json.dumps({"output_units": units}))
    photo(45, 70).save(tmp_path / "p.png")
    focal = ["--focal", "700"] if meaning == CANONICAL else []
    depth = single(capsys, model, tmp_path / "p.png", tmp_path / "photo", *focal, bar=True)
    at_input = single(capsys, model, tmp_path / "p.png", tmp_path / "model", "--model-size", *focal, bar=True)
    with native_stderr_muted():
        raw = Predictor(tiny_tflite, model_size=True).depth(load_image(tmp_path / "p.png"))
    factor = 700 * (70 / 70 + 56 / 45) / 2 / 300 if meaning == CANONICAL else 1.0
    np.testing.assert_allclose(at_input, raw * factor, rtol=1e-6)
    np.testing.assert_allclose(depth, bicubic(at_input, (45, 70)), rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------------------ Ctrl-C
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
