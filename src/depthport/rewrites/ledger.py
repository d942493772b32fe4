"""The numerical effect of each rewrite, measured by applying them one at a time to the loaded model."""

from __future__ import annotations

import numpy as np
import torch

from ..core.metrics import max_abs, rel_l2
from ..models.layers import query_chunks
from .steps import REWRITES


def ledger_rewrites(rewrites) -> list[str]:
    """The rewrites the ledger measures: all but the input-normalisation fold, which changes what the input means
    (the tests check it)."""
    return [n for n in rewrites if n != "fold_input_normalization"]


@torch.no_grad()
def measure(steps, x, on_pass=None) -> list[dict]:
    """``steps``: (None, the un-rewritten model), then (rewrite name, the model with the rewrites so far applied)
    for each rewrite in order (``build.build_steps``). Each entry compares the output after the step with the
    output before it and with the un-rewritten model. ``x``: the input, or a tuple of the inputs (image and
    prompt). ``on_pass(done, name)`` after each forward pass."""
    x = tuple(torch.as_tensor(a) for a in (x if isinstance(x, tuple) else (x,)))
    with query_chunks():
        return _measure(iter(steps), x, on_pass)


def _measure(steps, x, on_pass) -> list[dict]:
    base = next(steps)[1](*x)
    if on_pass is not None:
        on_pass(1, "before any rewrite")
    previous, ledger = base, []
    for name, model in steps:
        out = model(*x)
        del model  # one copy of the model at a time: the next step's is made while this name is still bound
        if on_pass is not None:
            on_pass(len(ledger) + 2, name)
        ledger.append({
            "rewrite": name,
            "exact": REWRITES[name].exact,
            "summary": REWRITES[name].summary,
            "rel_l2_step": rel_l2(out, previous),
            "max_abs_step": max_abs(out, previous),
            "rel_l2_cumulative": rel_l2(out, base),
        })
        previous = out
    return ledger
