"""Accuracy against ground truth: the Middlebury 2014 motorcycle pair that ships inside scikit-image.

The prediction, known up to scale and shift, is resized (bilinear) to the ground truth's 500x741, aligned to
the ground truth by least-squares scale and shift over the valid pixels, and scored in the model's own output
space: relative inverse depth against the disparity (an affine function of inverse depth, so the alignment
absorbs the offset); depth (larger = farther, Depth Anything 3) against metric depth from the disparity and
the scene's calibration, Z = baseline x focal / (disparity + doffs). AbsRel = mean(|p - g| / g), δ1 = fraction
with max(p/g, g/p) < 1.25 (aligned pixels <= 0 count as misses). Invalid ground truth (inf, nan, <= 0) is
masked out.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

DATASET = "Middlebury 2014 motorcycle, left view, ground-truth disparity (scikit-image stereo_motorcycle)"
# Calibration of the 4x down-sampled pair, as scikit-image's stereo_motorcycle documents it.
FOCAL_PX, DOFFS_PX, BASELINE_M = 994.978, 31.086, 0.193001
SPACES = ("inverse depth", "depth")


def depth_from_disparity(disparity: np.ndarray) -> np.ndarray:
    """Metric depth in metres of the motorcycle scene (NaN stays NaN)."""
    return BASELINE_M * FOCAL_PX / (np.asarray(disparity, np.float64) + DOFFS_PX)


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


def score(pred: np.ndarray, disparity: np.ndarray, space: str = "inverse depth") -> dict:
    """AbsRel and δ1 of ``pred`` (any size) against the ground-truth ``disparity`` (NaN = invalid) after
    scale-and-shift alignment, in ``space``: "inverse depth" (scored against the disparity) or "depth"
    (scored against metric depth)."""
    if space not in SPACES:
        raise ValueError(f"unknown output space {space!r}; known: {SPACES}")
    gt = np.asarray(disparity, np.float64) if space == "inverse depth" else depth_from_disparity(disparity)
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
            "scale": scale, "shift": shift, "valid_pixels": int(mask.sum()), "space": space}


def meaning(random_weights: bool, space: str = "inverse depth") -> str:
    if random_weights:
        return "RANDOM WEIGHTS: these accuracy figures are meaningless (the code path is exercised only)"
    against = "the disparity" if space == "inverse depth" else "metric depth from the calibrated disparity"
    return f"{space} up to scale and shift, fitted per image against {against}; one scene, not a benchmark"
