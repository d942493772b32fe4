"""rewrites: named, exact-or-declared transformations of a built model, and their measured effect (ledger).
May import models and fp16.safe; not export or later stages."""

from .steps import REWRITES, Rewrite, apply, default_rewrites

__all__ = ["REWRITES", "Rewrite", "apply", "default_rewrites"]
