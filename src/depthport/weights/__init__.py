"""weights: one converter per upstream checkpoint format, key maps as data, strict accounting, file/cache/hub.
May import models and spec; not export or later stages."""

from .errors import CheckpointMismatch, WeightsError, WeightsUnavailable
from .load import LoadedWeights, load_weights

__all__ = ["CheckpointMismatch", "WeightsError", "WeightsUnavailable", "LoadedWeights", "load_weights"]
