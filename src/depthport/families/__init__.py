"""families: each architecture family's functions (build, load, reference, preprocess) that a ModelSpec names. Layer
3, above weights and reference: may import core, spec, models and weights, and reference lazily; not registry or
any stage."""
