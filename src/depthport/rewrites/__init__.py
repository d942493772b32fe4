"""Named, exact-or-declared transformations of a built model that make its exported graph GPU-clean.

Each rewrite changes the module tree in place after the weights are loaded. ``REWRITES`` lists them in the
order they are applied; ``ledger.measure`` records each one's numerical effect.
"""

from .steps import REWRITES, Rewrite, apply, default_rewrites

__all__ = ["REWRITES", "Rewrite", "apply", "default_rewrites"]
