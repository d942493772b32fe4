"""Netpbm greyscale files wider than 8 bits (PGM, PNM of maxval above 255: what dcraw -4, ImageMagick, scientific and
depth cameras write) are read as a viewer shows them, value / maxval at 8 bits; Pillow 13.0 opens them as mode I
scaled to 0..65535, which other 32-bit images (a TIFF of mode I) are not, and those are still refused."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from depthport.errors import InputError
from depthport.preprocess import load_image


def ramp(maxval: int, h: int = 30, w: int = 40) -> np.ndarray:
    """0..maxval across the width, with 1 and maxval - 1 in the first row: the ends a scaling can get wrong."""
    values = (np.arange(w) * maxval // (w - 1)).astype(np.int64)
    samples = np.tile(values, (h, 1))
    samples[0, 1], samples[0, 2] = 1, maxval - 1
    return samples


def write_pgm(path, samples: np.ndarray, maxval: int, plain: bool = False) -> None:
    """A P5 (binary, big-endian samples, 2 bytes each above maxval 255) or P2 (plain text) greyscale file."""
    h, w = samples.shape
    if plain:
        body = "\n".join(" ".join(str(v) for v in row) for row in samples).encode() + b"\n"
        path.write_bytes(f"P2\n{w} {h}\n{maxval}\n".encode() + body)
    else:
        path.write_bytes(f"P5\n{w} {h}\n{maxval}\n".encode() + samples.astype(">u2").tobytes())


@pytest.mark.parametrize(("maxval", "name", "plain"), [(65535, "grey16.pgm", False), (1023, "grey10.pgm", False),
                                                       (4095, "grey12.pnm", False), (1023, "plain10.pgm", True)])
def test_a_pgm_of_maxval_above_255_reads_as_its_8_bit_scaling(tmp_path, maxval, name, plain):
    samples = ramp(maxval)
    write_pgm(tmp_path / name, samples, maxval, plain)
    img = load_image(tmp_path / name)
    assert img.mode == "RGB" and img.size == (40, 30)
    got = np.asarray(img).astype(int)
    expected = np.round(samples / maxval * 255).astype(int)
    assert np.abs(got - expected[..., None]).max() <= 1
    assert got[0, 0].tolist() == [0, 0, 0] and got[0, -1].tolist() == [255, 255, 255]


def test_a_16_bit_pgm_reads_as_the_same_picture_as_a_16_bit_png(tmp_path):
    samples = ramp(65535)
    write_pgm(tmp_path / "grey16.pgm", samples, 65535)
    Image.fromarray(samples.astype(np.uint16)).save(tmp_path / "grey16.png")
    assert Image.open(tmp_path / "grey16.png").mode.startswith("I;16")
    np.testing.assert_array_equal(np.asarray(load_image(tmp_path / "grey16.pgm")),
                                  np.asarray(load_image(tmp_path / "grey16.png")))


def test_a_16_bit_rgb_ppm_still_reads(tmp_path):
    for maxval in (65535, 1023):
        samples = ramp(maxval)
        rgb = np.dstack([samples, samples[:, ::-1], np.full_like(samples, maxval // 2)])
        (tmp_path / "rgb.ppm").write_bytes(f"P6\n40 30\n{maxval}\n".encode() + rgb.astype(">u2").tobytes())
        got = np.asarray(load_image(tmp_path / "rgb.ppm")).astype(int)
        assert np.abs(got - np.round(rgb / maxval * 255)).max() <= 1


def test_a_32_bit_tiff_is_still_refused(tmp_path):
    Image.fromarray(ramp(1 << 20).astype(np.int32)).save(tmp_path / "i32.tif")
    assert Image.open(tmp_path / "i32.tif").mode == "I"
    message = (f"unsupported image mode 'I' in {tmp_path / 'i32.tif'}: a 32-bit or signed integer greyscale image "
               "has no defined mapping to 8-bit RGB; convert it to 8 bits first")
    with pytest.raises(InputError, match=re.escape(message)):
        load_image(tmp_path / "i32.tif")
