"""Depth maps to pictures: colourised PNGs with a matplotlib colour map."""

from __future__ import annotations

import numpy as np
from PIL import Image


def colorize(depth: np.ndarray, cmap: str = "Spectral_r", lo: float | None = None, hi: float | None = None) -> Image.Image:
    """(H, W) depth -> RGB image, scaled between the 2nd and 98th percentile unless lo/hi are given."""
    from matplotlib import colormaps

    d = np.asarray(depth, dtype=np.float64)
    lo = float(np.percentile(d, 2)) if lo is None else lo
    hi = float(np.percentile(d, 98)) if hi is None else hi
    scaled = np.clip((d - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
    rgb = (colormaps[cmap](scaled)[..., :3] * 255).round().astype(np.uint8)
    return Image.fromarray(rgb)
