"""Planted defects: export-form models that are wrong in ways a conversion can be, to show that the FP32 gate
refuses them (``tests/verify/test_fp32_gate.py``, ``benchmarks/fp32_gate.py``).

Each builder returns the export-form model of ``spec`` at ``input_hw`` with ``weights``, as ``build`` makes it,
but with one defect:
- ``pos_formula_swapped``: the position embedding resampled with the other implementation's formula
  (transformers' ``scale_factor`` vs the official ``(n + 0.1) / 37``);
- ``fold_in_bfloat16``: one folded projection (the first block's Q) rounded to bfloat16, as a fold done in
  reduced precision would leave it;
- ``eps_1e4``: every LayerNorm epsilon 10^4 times too large;
- ``folds_in_float32``: every rewrite computed in float32 instead of float64;
- ``eps_dropped``: every LayerNorm epsilon set to 0.
The last two move the output by less than FP32's own rounding on the models measured here (their ratio to
float64 stays at the correct file's): no parity figure can see them, and they are reported as such.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .. import rewrites as rw
from ..build import architecture, build


def _reference_form(spec, input_hw, weights, pos_formula) -> nn.Module:
    model = architecture(spec, input_hw, pos_formula).double()
    model.load_state_dict(weights.state, strict=True)
    return model


def _set_eps(model: nn.Module, fn) -> None:
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            m.eps = fn(m.eps)


@torch.no_grad()
def pos_formula_swapped(spec, input_hw, weights) -> nn.Module:
    right = build(spec, input_hw, weights).pos_formula
    return build(spec, input_hw, weights, pos_formula="official" if right == "transformers" else "transformers").model


@torch.no_grad()
def fold_in_bfloat16(spec, input_hw, weights) -> nn.Module:
    model = build(spec, input_hw, weights).model
    linear = next(m for name, m in model.named_modules() if isinstance(m, nn.Linear)
                  and name.endswith(("blocks.0.attn.q", "blocks.0.attn.q.proj")))
    linear.weight.copy_(linear.weight.to(torch.bfloat16).float())
    return model


def _with_eps(fn) -> Callable:
    @torch.no_grad()
    def make(spec, input_hw, weights) -> nn.Module:
        built = build(spec, input_hw, weights)
        model = _reference_form(spec, input_hw, weights, built.pos_formula)
        _set_eps(model, fn)
        rw.apply(model, built.rewrites)
        return model.float().eval()
    return make


@torch.no_grad()
def folds_in_float32(spec, input_hw, weights) -> nn.Module:
    built = build(spec, input_hw, weights)
    model = _reference_form(spec, input_hw, weights, built.pos_formula).float()
    rw.apply(model, built.rewrites)
    return model.eval()


DEFECTS: dict[str, Callable] = {
    "pos_formula_swapped": pos_formula_swapped,
    "fold_in_bfloat16": fold_in_bfloat16,
    "eps_1e4": _with_eps(lambda eps: eps * 1e4),
    "folds_in_float32": folds_in_float32,
    "eps_dropped": _with_eps(lambda eps: 0.0),
}
# The defects that move the output by less than FP32 rounding (see the module docstring).
BELOW_FP32_NOISE = ("folds_in_float32", "eps_dropped")
