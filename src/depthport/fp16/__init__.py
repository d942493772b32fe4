"""fp16: what FP16 compute does to a model (simulate), the FP16-safe norm rewrite and FP16 weight storage. Layer 4,
below rewrites: may import core and models; not rewrites, build or any stage."""

from .safe import Fp16SafeScaleNorm, fp16_safe_norm
from .simulate import FP16_MAX, Fp16Prediction, simulate_fp16
from .weights import cast_constants_fp16

__all__ = ["FP16_MAX", "Fp16Prediction", "Fp16SafeScaleNorm", "cast_constants_fp16", "fp16_safe_norm",
           "simulate_fp16"]
