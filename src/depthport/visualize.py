"""Depth maps to pictures: colourised PNGs with a matplotlib colour map, and a colour bar for metric depth."""

from __future__ import annotations

import numpy as np
from PIL import Image


def depth_range(depth: np.ndarray) -> tuple[float, float]:
    """The 2nd and 98th percentiles: the span a picture of ``depth`` shows."""
    d = np.asarray(depth, dtype=np.float64)
    return float(np.percentile(d, 2)), float(np.percentile(d, 98))


def colorize(depth: np.ndarray, cmap: str = "Spectral_r", lo: float | None = None, hi: float | None = None) -> Image.Image:
    """(H, W) depth -> RGB image, scaled between the 2nd and 98th percentile unless lo/hi are given."""
    from matplotlib import colormaps

    d = np.asarray(depth, dtype=np.float64)
    p_lo, p_hi = depth_range(d)
    lo = p_lo if lo is None else lo
    hi = p_hi if hi is None else hi
    scaled = np.clip((d - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
    rgb = (colormaps[cmap](scaled)[..., :3] * 255).round().astype(np.uint8)
    return Image.fromarray(rgb)


def with_colorbar(picture: Image.Image, lo: float, hi: float, label: str, cmap: str = "Spectral_r") -> Image.Image:
    """``picture`` (colourised between ``lo`` and ``hi`` with ``cmap``) with a vertical colour bar on its right,
    ``label`` above it and tick values (matplotlib's tick choice) beside it; the picture itself is unchanged."""
    from matplotlib import colormaps
    from matplotlib.ticker import MaxNLocator
    from PIL import ImageDraw, ImageFont

    w, h = picture.size
    size = max(10, min(h // 30, 28))
    font = ImageFont.load_default(size=size)
    ticks = [t for t in MaxNLocator(nbins=6).tick_values(lo, hi) if lo <= t <= hi] or [lo, hi]
    texts = [f"{t:g}" for t in ticks]
    text_w = max(int(font.getlength(t)) for t in texts + [label])
    bar_w, pad = max(8, size), max(4, size // 2)
    canvas = Image.new("RGB", (w + 3 * pad + bar_w + text_w, h), "white")
    canvas.paste(picture.convert("RGB"), (0, 0))
    top, bottom = pad + size + pad, h - pad - size // 2
    span = max(bottom - top, 1)
    values = np.linspace(hi, lo, span)[:, None]
    colours = colormaps[cmap](np.clip((values - lo) / max(hi - lo, 1e-12), 0, 1))[..., :3]
    bar = Image.fromarray((np.repeat(colours, bar_w, axis=1) * 255).round().astype(np.uint8))
    x0 = w + pad
    canvas.paste(bar, (x0, top))
    draw = ImageDraw.Draw(canvas)
    draw.text((x0, pad), label, fill="black", font=font)
    for t, text in zip(ticks, texts):
        y = top + round((hi - t) / max(hi - lo, 1e-12) * (span - 1))
        draw.line([(x0 + bar_w, y), (x0 + bar_w + pad // 2, y)], fill="black")
        draw.text((x0 + bar_w + pad, y), text, fill="black", font=font, anchor="lm")
    return canvas
