"""`depthport predict` as image tools do it: the photo as a viewer shows it (EXIF orientation, colour profile,
colour forms)."""

from __future__ import annotations

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
from depthport.core.images import folder_set
from depthport.preprocess import load_image


def photo(h: int = 40, w: int = 60, seed: int = 0) -> Image.Image:
    """A smooth, non-square RGB picture (random blobs), so that depth differs across it."""
    coarse = torch.rand(1, 3, max(2, h // 8), max(2, w // 8), generator=torch.Generator().manual_seed(seed))
    fine = torch.nn.functional.interpolate(coarse, size=(h, w), mode="bilinear", align_corners=False)
    return Image.fromarray((fine[0].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8))


# ------------------------------------------------------------------------------------------------ the photo
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
