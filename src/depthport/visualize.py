"""Depth maps to pictures: colourised PNGs with a matplotlib colour map, and a colour bar for metric depth."""

from __future__ import annotations

import numpy as np
from PIL import Image


def depth_range(depth: np.ndarray) -> tuple[float, float]:
    """The 2nd and 98th percentiles: the span a picture of ``depth`` shows."""
    d = np.asarray(depth, dtype=np.float64)
    return float(np.percentile(d, 2)), float(np.percentile(d, 98))


# Pixels colourised at a time: matplotlib's colour maps return float64 RGBA (32 bytes a pixel), so a 200-megapixel
# depth map done at once would need ~20 GB.
CHUNK_PIXELS = 1 << 22


def colorize(depth: np.ndarray, cmap: str = "Spectral_r", lo: float | None = None, hi: float | None = None) -> Image.Image:
    """(H, W) depth -> RGB image, scaled between the 2nd and 98th percentile unless lo/hi are given; computed in
    bands of rows (``CHUNK_PIXELS``), each pixel as a whole-image pass would compute it."""
    from matplotlib import colormaps

    colour, depth = colormaps[cmap], np.asarray(depth)
    if lo is None or hi is None:
        p_lo, p_hi = depth_range(depth)
        lo = p_lo if lo is None else lo
        hi = p_hi if hi is None else hi
    span = max(hi - lo, 1e-12)
    rgb = np.empty((*depth.shape, 3), np.uint8)
    rows = max(1, CHUNK_PIXELS // max(depth.shape[1], 1))
    for top in range(0, depth.shape[0], rows):
        scaled = np.clip((np.asarray(depth[top:top + rows], dtype=np.float64) - lo) / span, 0.0, 1.0)
        rgb[top:top + rows] = (colour(scaled)[..., :3] * 255).round().astype(np.uint8)
    return Image.fromarray(rgb)


def with_colorbar(picture: Image.Image, lo: float, hi: float, label: str, cmap: str = "Spectral_r") -> Image.Image:
    """``picture`` (colourised between ``lo`` and ``hi`` with ``cmap``) with a colour-bar legend drawn inside it,
    at its right edge on a white panel: ``label`` above a vertical bar, tick values (matplotlib's tick choice)
    beside it. The size stays the picture's, so the PNG lines up with the photo and the .npy pixel for pixel;
    the panel hides the depth beneath it (the .npy has every value)."""
    from matplotlib import colormaps
    from matplotlib.ticker import MaxNLocator
    from PIL import ImageDraw, ImageFont

    canvas = picture.convert("RGB")
    w, h = canvas.size
    size = max(8, min(h // 30, 28))
    font = ImageFont.load_default(size=size)
    ticks = [t for t in MaxNLocator(nbins=5).tick_values(lo, hi) if lo <= t <= hi] or [lo, hi]
    texts = [f"{t:g}" for t in ticks]
    bar_w, pad = max(6, size * 2 // 3), max(3, size // 3)
    panel_w = pad + max(bar_w + pad + max(int(font.getlength(t)) for t in texts), int(font.getlength(label))) + pad
    panel_h = min(h - 2 * pad, max(h * 3 // 5, 3 * size + 4 * pad))
    x0, y0 = max(0, w - panel_w - pad), pad
    draw = ImageDraw.Draw(canvas)
    draw.rectangle([x0, y0, min(w, x0 + panel_w) - 1, y0 + panel_h], fill="white")
    draw.text((x0 + pad, y0 + pad), label, fill="black", font=font)
    top, bottom = y0 + 2 * pad + size, y0 + panel_h - pad - size // 2
    span = max(bottom - top, 1)
    values = np.linspace(hi, lo, span)[:, None]
    colours = colormaps[cmap](np.clip((values - lo) / max(hi - lo, 1e-12), 0, 1))[..., :3]
    canvas.paste(Image.fromarray((np.repeat(colours, bar_w, axis=1) * 255).round().astype(np.uint8)),
                 (x0 + pad, top))
    for t, text in zip(ticks, texts):
        y = top + round((hi - t) / max(hi - lo, 1e-12) * (span - 1))
        draw.line([(x0 + pad + bar_w, y), (x0 + 2 * pad + bar_w - 1, y)], fill="black")
        draw.text((x0 + 2 * pad + bar_w, y), text, fill="black", font=font, anchor="lm")
    return canvas
