"""FP16-compute prediction: it flags what overflows in FP16, passes what doesn't, and the FP16-safe norm fixes it."""

import copy

import pytest
import torch
from torch import nn

from depthport.fp16 import Fp16SafeScaleNorm, fp16_safe_norm, simulate_fp16
from depthport.models.layers import ScaleNorm

from helpers import TINY_HW, image_batch


def toy(gain: float) -> nn.Module:
    """Linear -> folded LayerNorm -> Linear; ``gain`` scales the first layer so that |x - mean| ~ gain."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), ScaleNorm(64, 1e-6), nn.Linear(64, 8)).eval()
    with torch.no_grad():
        model[0].weight.mul_(gain)
    return model


X = torch.randn(10, 16, generator=torch.Generator().manual_seed(1))


def test_benign_model_passes():
    prediction = simulate_fp16(toy(1.0), X)
    assert prediction.overflow_layers == [] and prediction.first_bad_layer is None
    assert not prediction.needs_enforce_f32
    assert 0 < prediction.rel_l2 < 1e-2  # rounding happened, and it is small
    assert prediction.pearson > 0.9999


def test_overflow_in_the_norm_is_flagged():
    prediction = simulate_fp16(toy(300.0), X)  # |d| ~ 500: d*d > 65504
    assert prediction.needs_enforce_f32
    assert prediction.overflow_layers == ["1"] and prediction.first_bad_layer == "1"
    assert prediction.events[0].op == "mul"
    assert prediction.rel_l2 > 0.5
    entry = prediction.as_entry()
    assert {"rel_l2", "pearson", "overflow_layers", "first_bad_layer", "needs_enforce_f32"} <= set(entry)


def test_unfolded_layernorm_is_decomposed_like_the_tflite_graph():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64)).eval()
    with torch.no_grad():
        model[0].weight.mul_(300.0)
    assert simulate_fp16(model, X).overflow_layers == ["1"]


def test_fp16_accumulation_catches_partial_sums_that_overflow():
    linear = nn.Linear(64, 1, bias=False).eval()
    with torch.no_grad():
        linear.weight.copy_(torch.cat([torch.ones(32), -torch.ones(32)])[None])
    x = torch.full((1, 64), 3000.0)  # each half sums to +-96000, the total to 0
    assert simulate_fp16(linear, x, accumulate="fp16", block=32).overflow_layers == ["model"]
    assert simulate_fp16(linear, x, accumulate="fp32").overflow_layers == []


def test_simulation_leaves_the_model_untouched():
    model = toy(1.0)
    before = copy.deepcopy(model.state_dict())
    simulate_fp16(model, X)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_safe_norm_is_exact_in_fp32_and_removes_the_overflow():
    model = toy(300.0)
    safe = copy.deepcopy(model)
    fp16_safe_norm(safe)
    assert isinstance(safe[1], Fp16SafeScaleNorm) and safe[1].k == 8
    assert torch.equal(safe(X), model(X))
    before, after = simulate_fp16(model, X), simulate_fp16(safe, X)
    assert after.overflow_layers == [] and not after.needs_enforce_f32
    assert after.rel_l2 < before.rel_l2 / 100


def test_safe_norm_is_a_registered_rewrite_exact_on_the_tiny_model(tiny_spec, tiny_weights, tiny_built):
    from depthport.build import build
    from depthport.rewrites import REWRITES, default_rewrites

    assert REWRITES["fp16_safe_norm"].exact
    safe = build(tiny_spec, TINY_HW, tiny_weights, rewrites=default_rewrites() + ["fp16_safe_norm"]).model
    assert not any(isinstance(m, ScaleNorm) for m in safe.modules())
    x = image_batch(TINY_HW, seed=3)
    assert torch.equal(safe(x), tiny_built.model(x))
    with pytest.raises(ValueError, match="fold_layernorm"):
        build(tiny_spec, TINY_HW, tiny_weights, rewrites=["fp16_safe_norm"])


def test_safe_norm_needs_folded_norms(tiny_spec, tiny_weights):
    from depthport.build import build

    with pytest.raises(ValueError, match="fold_layernorm"):
        fp16_safe_norm(build(tiny_spec, TINY_HW, tiny_weights, rewrites=[]).model)


def test_tiny_depth_model_is_fp16_safe(tiny_built):
    prediction = simulate_fp16(tiny_built.model, image_batch(TINY_HW, seed=4))
    assert not prediction.needs_enforce_f32 and prediction.overflow_layers == []
    assert prediction.pearson > 0.999
