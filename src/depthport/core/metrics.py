"""Agreement between two depth maps, per image and pooled over a set.

``a`` is the map under test, ``b`` the reference. Everything is computed in float64.

δ<1.25 needs positive maps, but relative inverse depth is ReLU-clamped (exact zeros, e.g. sky) and random
weights can give any sign. Both maps are therefore shifted by the same amount, chosen from the reference
alone: ``shift = floor - min(b)`` with ``floor = 1e-3 * (max(b) - min(b))`` (nothing is shifted when
``min(b) >= floor``). After the shift every reference pixel is >= floor; a pixel of ``a`` that is still
<= 0 counts as a miss.

A tested map that is not finite (inf or NaN anywhere) has relative L2 ``inf`` and Pearson ``NaN``.
"""

from __future__ import annotations

import math

import numpy as np

DELTA_FLOOR = 1e-3
DELTA_DEFINITION = ("fraction of pixels with max(a/b, b/a) < 1.25, after shifting both maps by "
                    f"floor - min(ref) when min(ref) < floor, floor = {DELTA_FLOOR:g} x (max(ref) - min(ref)); "
                    "pixels of the tested map still <= 0 count as misses")


def _pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"maps differ in size: {a.size} vs {b.size} values")
    return a, b


def pearson(a, b) -> float:
    """Pearson correlation; 1.0 for two identical constant maps, 0.0 when only one is constant."""
    a, b = _pair(a, b)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    da, db = a - a.mean(), b - b.mean()
    na, nb = np.sqrt((da * da).sum()), np.sqrt((db * db).sum())
    if na == 0 or nb == 0:
        return 1.0 if np.array_equal(a, b) else 0.0
    return float((da * db).sum() / (na * nb))


def sq_err(a, b) -> tuple[float, float]:
    """(sum (a-b)^2, sum b^2): the two sums the pooled relative L2 adds up over images."""
    a, b = _pair(a, b)
    return float(((a - b) ** 2).sum()), float((b * b).sum())


def root_ratio(err: float, ref: float) -> float:
    """sqrt(err / ref): the relative L2 error from ``sq_err``'s two sums."""
    if not math.isfinite(err):
        return float("inf")
    return float(np.sqrt(err / ref)) if ref > 0 else (0.0 if err == 0 else float("inf"))


def rel_l2(a, b) -> float:
    """||a - b|| / ||b|| in float64 (0 when both are zero, inf when ``b`` alone is)."""
    return root_ratio(*sq_err(a, b))


def pooled_rel_l2(pairs) -> float:
    """sqrt(sum_i ||a_i - b_i||^2 / sum_i ||b_i||^2) over (a, b) pairs."""
    sums = [sq_err(a, b) for a, b in pairs]
    return root_ratio(sum(s[0] for s in sums), sum(s[1] for s in sums))


def max_abs(a, b) -> float:
    a, b = _pair(a, b)
    return float(np.abs(a - b).max())


def delta125(a, b) -> float:
    """Fraction of pixels within a factor 1.25 of the reference ``b`` (see the module docstring)."""
    a, b = _pair(a, b)
    lo, hi = float(b.min()), float(b.max())
    floor = DELTA_FLOOR * (hi - lo) if hi > lo else DELTA_FLOOR * max(abs(hi), 1.0)
    shift = floor - lo if lo < floor else 0.0
    a, b = a + shift, b + shift
    ok = a > 0
    ratio = np.full(a.shape, np.inf)
    ratio[ok] = np.maximum(a[ok] / b[ok], b[ok] / a[ok])
    return float((ratio < 1.25).mean())


def mean_abs(a, b) -> float:
    """Mean absolute difference, in the maps' own unit (metres for a metric model)."""
    a, b = _pair(a, b)
    return float(np.abs(a - b).mean())


def image_metrics(a, b) -> dict:
    err, ref = sq_err(a, b)
    return {"pearson": pearson(a, b), "rel_l2": root_ratio(err, ref), "max_abs": max_abs(a, b),
            "mean_abs": mean_abs(a, b), "delta125": delta125(a, b), "_sq_err": err, "_sq_ref": ref}


def summarize(per_image: list[dict]) -> dict:
    """Worst and median over images, pooled relative L2, the overall max abs difference and the worst image's
    mean absolute difference (in metres for a metric model)."""
    if not per_image:
        raise ValueError("no images to summarise")
    corr = [m["pearson"] for m in per_image]
    delta = [m["delta125"] for m in per_image]
    mean = [m["mean_abs"] for m in per_image]
    err, ref = sum(m["_sq_err"] for m in per_image), sum(m["_sq_ref"] for m in per_image)
    return {
        "images": len(per_image),
        "pearson_worst": float(min(corr)),
        "pearson_median": float(np.median(corr)),
        "rel_l2_pooled": root_ratio(err, ref),
        "max_abs": float(max(m["max_abs"] for m in per_image)),
        "mean_abs_worst": float(max(mean)),
        "mean_abs_median": float(np.median(mean)),
        "delta125_worst": float(min(delta)),
        "delta125_median": float(np.median(delta)),
    }


def public(per_image: dict) -> dict:
    """A per-image record without the private sums."""
    return {k: v for k, v in per_image.items() if not k.startswith("_")}
