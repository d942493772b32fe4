"""Accuracy against ground truth: the Middlebury 2014 motorcycle pair that ships inside scikit-image.

The prediction is relative inverse depth, known up to scale and shift. It is resized (bilinear) to the
ground truth's 500x741, aligned to the disparity by least-squares scale and shift over the valid pixels, and
scored in disparity space (Middlebury's disparity is an affine function of inverse depth, so the alignment
absorbs the offset): AbsRel = mean(|p - d| / d), δ1 = fraction with max(p/d, d/p) < 1.25 (aligned pixels
<= 0 count as misses). Invalid ground truth (inf, nan, <= 0) is masked out.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

DATASET = "Middlebury 2014 motorcycle, left view, ground-truth disparity (scikit-image stereo_motorcycle)"


def motorcycle() -> tuple[Image.Image, np.ndarray]:
    """(left RGB image, disparity float64 with NaN where the ground truth is invalid)."""
    from skimage import data

    left, _, disp = data.stereo_motorcycle()
    disp = np.asarray(disp, np.float64)
    disp[~np.isfinite(disp) | (disp <= 0)] = np.nan
    return Image.fromarray(left).convert("RGB"), disp


def resize_to(pred: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    if np.shape(pred) == tuple(hw):
        return np.asarray(pred, np.float64)
    image = Image.fromarray(np.asarray(pred, np.float32))  # mode "F"
    return np.asarray(image.resize((hw[1], hw[0]), Image.Resampling.BILINEAR), np.float64)


def align_scale_shift(pred: np.ndarray, target: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """(s, t) minimising sum over mask of (s * pred + t - target)^2."""
    p, t = pred[mask].astype(np.float64), target[mask].astype(np.float64)
    design = np.stack([p, np.ones_like(p)], axis=1)
    (scale, shift), *_ = np.linalg.lstsq(design, t, rcond=None)
    return float(scale), float(shift)


def score(pred: np.ndarray, gt: np.ndarray) -> dict:
    """AbsRel and δ1 of ``pred`` (any size) against ``gt`` (NaN = invalid) after scale-and-shift alignment."""
    gt = np.asarray(gt, np.float64)
    mask = np.isfinite(gt) & (gt > 0)
    if not mask.any():
        raise ValueError("the ground truth has no valid pixel")
    pred = resize_to(pred, gt.shape)
    scale, shift = align_scale_shift(pred, gt, mask)
    aligned, target = scale * pred[mask] + shift, gt[mask]
    ratio = np.full(aligned.shape, np.inf)
    ok = aligned > 0
    ratio[ok] = np.maximum(aligned[ok] / target[ok], target[ok] / aligned[ok])
    return {"abs_rel": float(np.mean(np.abs(aligned - target) / target)), "delta1": float(np.mean(ratio < 1.25)),
            "scale": scale, "shift": shift, "valid_pixels": int(mask.sum())}


def meaning(random_weights: bool) -> str:
    if random_weights:
        return "RANDOM WEIGHTS: these accuracy figures are meaningless (the code path is exercised only)"
    return "relative depth, scale and shift fitted per image; one scene, not a benchmark"
