"""families: each architecture family's functions (build, load, reference, preprocess) that a ModelSpec names.
May import models, weights and reference lazily; not export or later stages."""
