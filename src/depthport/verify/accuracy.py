"""Accuracy against ground truth: the Middlebury 2014 motorcycle pair that ships inside scikit-image.

The prediction is resized (bilinear) to the ground truth's 500x741 and scored in the model's own output space:
relative inverse depth against the disparity (an affine function of inverse depth); depth (larger = farther)
against metric depth from the disparity and the scene's published calibration, Z = baseline x focal /
(disparity + doffs). A prediction known up to scale and shift is first aligned to the ground truth by
least-squares scale and shift over the valid pixels; a metric one (metres, or canonical depth turned into metres
with the scene's focal length at the model's input size) is scored as it is, in metres, with no alignment.
AbsRel = mean(|p - g| / g), δ1 = fraction with max(p/g, g/p) < 1.25 (pixels <= 0 count as misses). Invalid
ground truth (inf, nan, <= 0) is masked out.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from ..core.ground_truth import BASELINE_M, DOFFS_PX, FOCAL_PX, depth_from_disparity, motorcycle
from ..core.report_model import Units, load

__all__ = ["BASELINE_M", "DOFFS_PX", "FOCAL_PX", "depth_from_disparity", "motorcycle", "score"]

DATASET = "Middlebury 2014 motorcycle, left view, ground-truth disparity (scikit-image stereo_motorcycle)"
SPACES = ("inverse depth", "depth")


def focal_at(input_hw: tuple[int, int], image_hw: tuple[int, int]) -> float:
    """The scene's focal length in pixels once the image is stretched to ``input_hw``: the mean of the two axes'
    (a stretch scales them differently), as Depth Anything 3 averages fx and fy."""
    return FOCAL_PX * (input_hw[0] / image_hw[0] + input_hw[1] / image_hw[1]) / 2


def metres_factor(units: Units | dict | None, input_hw: tuple[int, int], image_hw: tuple[int, int]) -> float | None:
    """What turns the model's output on this scene into metres: 1 for metres, focal_px / focal_reference for
    canonical depth, None for an output that has no unit (``units``: report.json ``output_units``)."""
    if isinstance(units, dict):
        units = load(Units, units)
    if units is None or not units.metric:
        return None
    focal = units.focal_reference_px
    return focal_at(input_hw, image_hw) / focal if focal else 1.0


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


def _figures(p: np.ndarray, g: np.ndarray) -> dict:
    ratio = np.full(p.shape, np.inf)
    ok = p > 0
    ratio[ok] = np.maximum(p[ok] / g[ok], g[ok] / p[ok])
    return {"abs_rel": float(np.mean(np.abs(p - g) / g)), "delta1": float(np.mean(ratio < 1.25))}


def score(pred: np.ndarray, disparity: np.ndarray, space: str = "inverse depth",
          to_metres: float | None = None) -> dict:
    """AbsRel and δ1 of ``pred`` (any size) against the ground-truth ``disparity`` (NaN = invalid), in ``space``:
    "inverse depth" (scored against the disparity) or "depth" (against metric depth), after scale-and-shift
    alignment. With ``to_metres`` (depth space only) the prediction times ``to_metres`` is metres and is scored
    as it is; the aligned figures are kept under ``aligned`` for comparison."""
    if space not in SPACES:
        raise ValueError(f"unknown output space {space!r}; known: {SPACES}")
    if to_metres is not None and space != "depth":
        raise ValueError("metric scoring needs a depth-space output")
    gt = np.asarray(disparity, np.float64) if space == "inverse depth" else depth_from_disparity(disparity)
    mask = np.isfinite(gt) & (gt > 0)
    if not mask.any():
        raise ValueError("the ground truth has no valid pixel")
    pred = resize_to(pred, gt.shape)
    scale, shift = align_scale_shift(pred, gt, mask)
    aligned = {**_figures(scale * pred[mask] + shift, gt[mask]), "scale": scale, "shift": shift}
    base = {"valid_pixels": int(mask.sum()), "space": space}
    if to_metres is None:
        return {**aligned, **base, "metric": False}
    metres = pred[mask] * to_metres
    return {**_figures(metres, gt[mask]), "mean_abs_m": float(np.mean(np.abs(metres - gt[mask]))),
            "scale": 1.0, "shift": 0.0, "to_metres": to_metres, **base, "metric": True, "aligned": aligned}


def meaning(random_weights: bool, space: str = "inverse depth", metric: bool = False) -> str:
    if random_weights:
        return "RANDOM WEIGHTS: these accuracy figures are meaningless (the code path is exercised only)"
    if metric:
        return ("metres as the model gives them, no alignment, against metric depth from the calibrated disparity "
                "(scale-and-shift-aligned figures under 'aligned'); one indoor scene, not a benchmark")
    against = "the disparity" if space == "inverse depth" else "metric depth from the calibrated disparity"
    return f"{space} up to scale and shift, fitted per image against {against}; one scene, not a benchmark"
