"""The one scene with metric ground truth that ships offline: the Middlebury 2014 motorcycle pair inside
scikit-image, with its published calibration (accuracy scoring, and the prompt depth of Prompt Depth Anything's
verification)."""

from __future__ import annotations

import numpy as np
from PIL import Image

# Calibration of the 4x down-sampled pair, as scikit-image's stereo_motorcycle documents it.
FOCAL_PX, DOFFS_PX, BASELINE_M = 994.978, 31.086, 0.193001


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
