"""Weights: one converter per upstream checkpoint format, key maps as data, strict accounting."""

from .errors import CheckpointMismatch, WeightsError, WeightsUnavailable
from .load import LoadedWeights, load_weights

__all__ = ["CheckpointMismatch", "WeightsError", "WeightsUnavailable", "LoadedWeights", "load_weights"]
