"""weights: one converter per upstream checkpoint format, key maps as data, strict accounting, file/cache/hub. Layer
3, the lowest of its layer: may import core, spec and models; not reference, families, registry or any stage."""

from .errors import CheckpointMismatch, WeightsError, WeightsUnavailable
from .load import LoadedWeights, load_weights

__all__ = ["CheckpointMismatch", "WeightsError", "WeightsUnavailable", "LoadedWeights", "load_weights"]
