"""rewrites: named, exact-or-declared transformations of a built model, and their measured effect (ledger). Layer 4,
above fp16: may import core, models and fp16; not build or any stage."""

from .steps import REWRITES, Rewrite, applied, apply, default_rewrites

__all__ = ["REWRITES", "Rewrite", "applied", "apply", "default_rewrites"]
