"""FP16-compute prediction: it flags what overflows in FP16, passes what doesn't, and the FP16-safe norm fixes it."""

import copy

import numpy as np

import pytest
import torch
from torch import nn

from depthport.fp16 import FP16_MAX, Fp16SafeScaleNorm, fp16_safe_norm, simulate_fp16
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
    unscaled = [r for r in default_rewrites() if r != "fp16_safe_stream"]
    safe = build(tiny_spec, TINY_HW, tiny_weights, rewrites=unscaled + ["fp16_safe_norm"]).model
    assert not any(isinstance(m, ScaleNorm) for m in safe.modules())
    x = image_batch(TINY_HW, seed=3)
    plain = build(tiny_spec, TINY_HW, tiny_weights, rewrites=unscaled).model
    assert torch.equal(safe(x), plain(x))
    # On top of fp16_safe_stream it leaves the norms alone (no second scaling, no op): the default model unchanged.
    both = build(tiny_spec, TINY_HW, tiny_weights, rewrites=default_rewrites() + ["fp16_safe_norm"]).model
    assert not any(isinstance(m, Fp16SafeScaleNorm) for m in both.modules())
    assert _call_ops(both, x) == _call_ops(tiny_built.model, x) and torch.equal(both(x), tiny_built.model(x))
    with pytest.raises(ValueError, match="fold_layernorm"):
        build(tiny_spec, TINY_HW, tiny_weights, rewrites=["fp16_safe_norm"])


def test_full_scale_stream_undoes_the_safe_stream_exactly(tiny_spec, tiny_weights):
    """full_scale_stream (what the XNNPACK fp16 forms do first): the stream at its own scale again, bit for bit the
    model without fp16_safe_stream, its norms no longer marked; a second call, or a model without it, does nothing."""
    from depthport.build import build
    from depthport.fp16.safe import default_scale, full_scale_stream
    from depthport.rewrites import default_rewrites

    names = default_rewrites()
    x = image_batch(TINY_HW, seed=5)
    plain = build(tiny_spec, TINY_HW, tiny_weights, rewrites=[n for n in names if n != "fp16_safe_stream"]).model
    model = build(tiny_spec, TINY_HW, tiny_weights, rewrites=names).model
    assert full_scale_stream(model) == default_scale(model.encoder.cfg.dim) > 1
    assert not any(hasattr(n, "stream_scale") for n in model.modules())
    assert full_scale_stream(model) == 1 and full_scale_stream(plain) == 1
    with torch.no_grad():
        assert torch.equal(model(x), plain(x))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), plain.state_dict().values()))


def _call_ops(model: nn.Module, x: torch.Tensor) -> list[str]:
    """The ops of ``model``'s exported graph, in order."""
    graph = torch.export.export(model, (x,)).graph
    return [str(node.target) for node in graph.nodes if node.op == "call_function"]


def test_safe_stream_is_exact_free_and_keeps_the_norms_finite_under_trained_weight_outliers(tiny_spec, tiny_weights):
    """fp16_safe_stream: the default export's residual stream k times smaller. FP32 output bit for bit the same, the
    same ops, and on stress weights (planted residual outliers) the norms no longer overflow in FP16; what overflows
    then is Q·Kᵀ, which the opt-in attention guard covers."""
    from depthport.build import build
    from depthport.fp16.safe import default_scale
    from depthport.registry import get_spec
    from depthport.rewrites import REWRITES, default_rewrites

    names = default_rewrites()
    without = [n for n in names if n != "fp16_safe_stream"]
    assert "fp16_safe_stream" in names and REWRITES["fp16_safe_stream"].exact
    x = image_batch(TINY_HW, seed=5)
    for weights in (tiny_weights, "stress"):
        plain = build(tiny_spec, TINY_HW, weights, rewrites=without).model
        scaled = build(tiny_spec, TINY_HW, weights, rewrites=names).model
        with torch.no_grad():
            assert torch.equal(scaled(x), plain(x))
    assert _call_ops(scaled, x) == _call_ops(plain, x)
    norms = [n for n in scaled.encoder.modules() if isinstance(n, ScaleNorm)]
    k = default_scale(scaled.encoder.cfg.dim)  # the power of two nearest sqrt(C): 4 for the tiny C = 32
    assert k > 1 and norms and all(n.stream_scale == k for n in norms)
    before, after = simulate_fp16(plain, x).overflow_layers, simulate_fp16(scaled, x).overflow_layers
    assert any("norm" in layer for layer in before)
    assert not any("norm" in layer for layer in after) and any("attn" in layer for layer in after)
    prompted = build(get_spec("prompt-da-tiny"), TINY_HW, "random", rewrites=names).model  # not covered yet
    assert not any(hasattr(n, "stream_scale") for n in prompted.modules())


@pytest.mark.parametrize("weights", ["random", "stress"])
def test_safe_stream_covers_depth_anything_3(weights):
    """Depth Anything 3's head reads the last local block's raw tokens beside the final norm: both come k times
    smaller, the head's norm takes eps / k^2, and the output is the same bit for bit; stress weights overflow only
    in Q·Kᵀ then."""
    from depthport.build import build
    from depthport.rewrites import default_rewrites

    names = default_rewrites()
    hw = (56, 98)
    plain = build("da3-tiny", hw, weights, rewrites=[n for n in names if n != "fp16_safe_stream"]).model
    scaled = build("da3-tiny", hw, weights, rewrites=names).model
    x = image_batch(hw, seed=6)
    with torch.no_grad():
        assert torch.equal(scaled(x), plain(x))
    assert scaled.encoder.norm.stream_scale == scaled.head.norm.stream_scale > 1
    assert _call_ops(scaled, x) == _call_ops(plain, x)
    after = simulate_fp16(scaled, x).overflow_layers
    assert not any("norm" in layer for layer in after)
    if weights == "stress":
        assert any("norm" in layer for layer in simulate_fp16(plain, x).overflow_layers) and after


def test_safe_norm_needs_folded_norms(tiny_spec, tiny_weights):
    from depthport.build import build

    with pytest.raises(ValueError, match="fold_layernorm"):
        fp16_safe_norm(build(tiny_spec, TINY_HW, tiny_weights, rewrites=[]).model)


def test_tiny_depth_model_is_fp16_safe(tiny_built):
    prediction = simulate_fp16(tiny_built.model, image_batch(TINY_HW, seed=4))
    assert not prediction.needs_enforce_f32 and prediction.overflow_layers == []
    assert prediction.pearson > 0.999


def _sequential_fp16_dot(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XNNPACK's f16 GEMM by hand: the accumulator starts at the bias, one FP16 FMA per product, in order."""
    acc = np.broadcast_to(b.astype(np.float16), (x.shape[0], w.shape[0])).copy()
    for k in range(x.shape[1]):
        prod = x[:, k:k + 1].astype(np.float32) * w[:, k].astype(np.float32)  # exact: fp16 x fp16 fits fp32
        acc = (acc.astype(np.float32) + prod).astype(np.float16)
    return acc.astype(np.float32)


def test_xnnpack_linear_is_one_fp16_fma_per_product_bit_for_bit():
    from depthport.fp16.kernels import linear_fma

    g = torch.Generator().manual_seed(5)
    x, w, b = (torch.randn(*s, generator=g).half().float() for s in ((6, 96), (5, 96), (5,)))
    expected = _sequential_fp16_dot(x.numpy(), w.numpy(), b.numpy())
    assert np.array_equal(linear_fma(x, w, b).numpy(), expected)
    assert not np.array_equal(expected, torch.nn.functional.linear(x, w, b).half().float().numpy())


def test_xnnpack_conv_and_matmul_match_their_fp32_results_to_fp16_precision():
    from depthport.fp16.kernels import conv2d_fma, matmul_fma, softmax_lanes

    g = torch.Generator().manual_seed(6)
    x, w = torch.randn(1, 6, 11, 13, generator=g), torch.randn(4, 6, 3, 3, generator=g)
    bias = torch.randn(4, generator=g)
    ref = torch.nn.functional.conv2d(x, w, bias, stride=2, padding=1)
    got = conv2d_fma(x, w, bias, stride=2, padding=1)
    assert got.shape == ref.shape and 0 < rel(got, ref) < 5e-3
    dw = torch.randn(6, 1, 3, 3, generator=g)
    assert 0 < rel(conv2d_fma(x, dw, None, 1, 1, 1, 6), torch.nn.functional.conv2d(x, dw, None, 1, 1, 1, 6)) < 5e-3
    gw = torch.randn(8, 3, 3, 3, generator=g)  # grouped (2 groups of 3 channels): one IGEMM per group
    grouped = conv2d_fma(x, gw, None, 1, 1, 1, 2)
    per_group = torch.cat([conv2d_fma(x[:, :3], gw[:4], None, 1, 1), conv2d_fma(x[:, 3:], gw[4:], None, 1, 1)], 1)
    assert torch.equal(grouped, per_group)
    assert 0 < rel(grouped, torch.nn.functional.conv2d(x, gw, None, 1, 1, 1, 2)) < 5e-3
    a, c = torch.randn(3, 7, 40, generator=g), torch.randn(3, 40, 9, generator=g)
    assert 0 < rel(matmul_fma(a, c), a @ c) < 5e-3
    s = torch.randn(2, 3, 77, generator=g) * 3
    for dim in (-1, 1):
        assert 0 < rel(softmax_lanes(s, dim), s.softmax(dim)) < 2e-3


def rel(a, b) -> float:
    return float((a - b).norm() / b.norm())


def _gpu_blocks(parts64) -> torch.Tensor:
    """The GPU's accumulation from its blocks' exact sums: each block's sum in float32, the running sum in float16."""
    from depthport.fp16.kernels import round_fp16

    acc = None
    for part in parts64:
        acc = round_fp16(part.float()) if acc is None else round_fp16(acc + part.float())
    return acc


def _same_to_the_last_fp16_bit(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal on nearly every element; elsewhere one float16 rounding apart (a block's float32 sum in another order)."""
    assert got.shape == want.shape
    assert (got == want).float().mean() >= 0.99
    assert float((got - want).abs().max()) <= 2.0 ** -9 * float(want.abs().max())


@pytest.mark.parametrize("tile_bytes", [1, 700, 1 << 30])
def test_gpu_blocked_products_are_their_blocks_summed_in_fp32_whatever_the_tiles(tile_bytes):
    """The GPU-precision kernels, tile by tile of the output (one row per tile, a few rows, all at once), give the
    blocked sums of a float64 reference: blocks of 32 products (3 input channels of a 3x3 kernel) rounded to float32,
    the running sum to float16; and every tiling gives the untiled result."""
    from depthport.fp16.kernels import conv2d_blocked, linear_blocked, matmul_blocked, round_fp16
    from depthport.models.layers import slices

    g = torch.Generator().manual_seed(3)

    def rand(*shape, scale=1.0):
        return round_fp16(torch.randn(*shape, generator=g) * scale)

    x, w, b = rand(2, 9, 100), rand(24, 100, scale=0.3), rand(24)
    got = linear_blocked(32, x, w, b, tile_bytes=tile_bytes)
    want = round_fp16(_gpu_blocks(x.double()[..., s] @ w.double()[:, s].T for s in slices(100, 32)) + b)
    _same_to_the_last_fp16_bit(got, want)
    _same_to_the_last_fp16_bit(got, linear_blocked(32, x, w, b))
    a, m = rand(3, 11, 70), rand(3, 70, 13, scale=0.3)
    got = matmul_blocked(32, a, m, tile_bytes=tile_bytes)
    _same_to_the_last_fp16_bit(got, _gpu_blocks(a.double()[..., s] @ m.double()[..., s, :] for s in slices(70, 32)))
    _same_to_the_last_fp16_bit(got, matmul_blocked(32, a, m))
    for cin, cout, kernel, stride, padding, dilation in [(8, 16, (3, 3), 1, 1, 1), (16, 8, (3, 3), 2, 1, 1),
                                                         (16, 16, (3, 3), 1, 2, 2), (12, 5, (1, 1), 1, 0, 1),
                                                         (6, 6, (3, 1), (2, 1), (1, 0), 1)]:
        x, w, b = rand(2, cin, 13, 17), rand(cout, cin, *kernel, scale=0.3), rand(cout)
        got = conv2d_blocked(32, x, w, b, stride, padding, dilation, tile_bytes=tile_bytes, column_bytes=tile_bytes)
        step = max(1, 32 // (kernel[0] * kernel[1]))
        parts = (torch.nn.functional.conv2d(x.double()[:, s], w.double()[:, s], None, stride, padding, dilation)
                 for s in slices(cin, step))
        _same_to_the_last_fp16_bit(got, round_fp16(_gpu_blocks(parts) + b[None, :, None, None]))


def test_accumulation_modes_order_by_how_much_they_round():
    """A long reduction: FP32 accumulation < GPU blocks summed in FP32 < XNNPACK's one FP16 FMA per product."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 64), nn.Linear(64, 8)).eval()
    x = torch.randn(32, 1024, generator=torch.Generator().manual_seed(2))
    errors = {mode: simulate_fp16(model, x, accumulate=mode).rel_l2 for mode in ("fp32", "fp16", "xnnpack")}
    assert 0 < errors["fp32"] < errors["fp16"] < errors["xnnpack"]
    assert simulate_fp16(model, x, accumulate="xnnpack").as_entry()["method"].startswith("PyTorch on CPU")
    with pytest.raises(ValueError, match="accumulate"):
        simulate_fp16(model, x, accumulate="bf16")


def test_arm_mode_flushes_fp16_subnormals_that_x86_keeps():
    """"xnnpack-arm" flushes FP16 subnormals (|v| < 2^-14) to zero, as XNNPACK on ARM does (measured on the emulated
    ARMv8.2-A CPU: 0.01 x 0.001 gives 0 there, 1e-5 on x86 with avx512_fp16), in op outputs, inside the FMA chain of
    a matrix product, and in the weights; "xnnpack" keeps them. Normal values are untouched."""
    from depthport.fp16.kernels import FP16_TINY, flush_, linear_fma

    h = torch.tensor([1e-5, -3e-5, FP16_TINY, -FP16_TINY, 0.5, float("inf")], dtype=torch.float16)
    assert flush_(h.clone()).tolist() == [0.0, 0.0, FP16_TINY, -FP16_TINY, 0.5, float("inf")]
    x, w = torch.full((1, 4), 0.01), torch.full((1, 4), 0.001)  # each product ~1e-5: subnormal
    assert float(linear_fma(x, w)) == pytest.approx(4e-5, rel=2e-2) and float(linear_fma(x, w, flush=True)) == 0.0
    model = nn.Sequential(nn.Linear(4, 1, bias=False)).eval()
    with torch.no_grad():
        model[0].weight.fill_(0.001)
    kept = simulate_fp16(model, x, accumulate="xnnpack")
    flushed = simulate_fp16(model, x, accumulate="xnnpack-arm")
    assert kept.rel_l2 < 2e-2 and flushed.rel_l2 == pytest.approx(1.0)  # the whole output lost
    assert "flushed to zero as on ARM" in flushed.as_entry()["method"]
    assert simulate_fp16(toy(1.0), X, accumulate="xnnpack-arm").rel_l2 == pytest.approx(
        simulate_fp16(toy(1.0), X, accumulate="xnnpack").rel_l2, rel=0.2)  # normal-range values: the same


def test_fp32_scopes_take_their_modules_out_of_fp16():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 64), nn.Linear(64, 8)).eval()
    x = torch.randn(32, 1024, generator=torch.Generator().manual_seed(2))
    plain = simulate_fp16(model, x, accumulate="xnnpack").rel_l2
    first_fp32 = simulate_fp16(model, x, accumulate="xnnpack", fp32_scopes=["0"]).rel_l2
    assert first_fp32 < plain / 2  # the long reduction was the error


def test_prediction_carries_gate_figures_per_image():
    prediction = simulate_fp16(toy(1.0), [X, X * 0.5])
    figures = prediction.figures
    assert {"rel_l2_pooled", "pearson_worst", "delta125_worst", "mean_abs_worst"} <= set(figures)
    assert figures["rel_l2_pooled"] == pytest.approx(prediction.rel_l2)
    assert len(prediction.per_image) == 2 and prediction.as_entry()["figures"] is figures


def test_fp16_ledger_names_what_each_group_would_buy(tiny_built):
    from depthport.check.fp16_compute import xnnpack_fp16_form
    from depthport.export.executorch import FORMS, backend_form
    from depthport.fp16.ledger import default_groups, fp16_ledger

    kept = default_groups(xnnpack_fp16_form(tiny_built.model))  # its head is already FP32: nothing to ledger there
    assert {"encoder attention", "encoder MLPs"} <= set(kept) and not any(g.startswith("head") for g in kept)
    form = backend_form(tiny_built.model, **{**FORMS["xnnpack-fp16"], "fp16_io": False, "fp32_head": False})[0]
    groups = default_groups(form)
    assert {"encoder attention", "encoder MLPs", "head: output convs"} <= set(groups)
    seen = []
    ledger = fp16_ledger(form, [image_batch(TINY_HW, seed=4)], groups=groups, progress=seen.append)
    assert len(seen) == len(groups) == len(ledger["rows"])
    base = ledger["baseline"]["rel_l2"]
    assert base > 0
    shares = [r["share_removed"] for r in ledger["rows"]]
    assert shares == sorted(shares, reverse=True)
    for row in ledger["rows"]:
        assert row["share_removed"] == pytest.approx(1 - row["rel_l2"] / base)


def test_stress_weights_overflow_norms_then_attention_and_the_guards_remove_both():
    """Trained-weight outliers planted in random weights: the plain graph's prediction names the norm overflow;
    with the norm guarded (the default export's fp16_safe_stream, or fp16_safe_norm), Q·Kᵀ overflows in the attention
    block it was planted in; with both guards nothing overflows and FP16 stays within the FP16 floor. FP32 is
    bit-identical with and without the guards."""
    from depthport.build import build
    from depthport.rewrites import REWRITES, default_rewrites
    from depthport.weights.stress import ATTENTION_BLOCK, LOGIT_TARGET

    assert REWRITES["fp16_safe_attention"].exact
    x = image_batch(TINY_HW, seed=4)
    models = {g: build("da2-tiny", TINY_HW, "stress", rewrites=default_rewrites(fp16_safe=g)).model
              for g in ((), ("norm",), ("norm", "attention"))}
    unguarded = [n for n in default_rewrites() if n != "fp16_safe_stream"]
    models["plain"] = build("da2-tiny", TINY_HW, "stress", rewrites=unguarded).model
    assert build("da2-tiny", TINY_HW, "stress").weights.random
    with torch.no_grad():
        outs = {g: m(x) for g, m in models.items()}
    assert all(torch.equal(o, outs[()]) for o in outs.values())
    plain = simulate_fp16(models["plain"], x)
    assert plain.needs_enforce_f32 and plain.events[0].layer.endswith("norm1") and plain.events[0].op == "mul"
    assert plain.max_abs_fp32 > FP16_MAX and plain.max_abs_layer == f"encoder.blocks.{ATTENTION_BLOCK}.attn"
    for guarded in ((), ("norm",)):
        normed = simulate_fp16(models[guarded], x)
        assert [(e.layer, e.op) for e in normed.events][:1] == [(f"encoder.blocks.{ATTENTION_BLOCK}.attn", "matmul")]
    assert plain.max_abs_fp32 > LOGIT_TARGET / 2
    for accumulate in ("fp16", "xnnpack"):
        safe = simulate_fp16(models[("norm", "attention")], x, accumulate=accumulate)
        assert safe.overflow_layers == [] and not safe.needs_enforce_f32
        assert safe.rel_l2 <= 2e-3 and safe.figures["delta125_worst"] >= 0.999
        assert safe.max_abs_fp32 < FP16_MAX


def test_unknown_fp16_guard_is_refused():
    from depthport.rewrites import default_rewrites

    with pytest.raises(ValueError, match="unknown FP16 guard"):
        default_rewrites(fp16_safe=("softmax",))


@pytest.mark.parametrize("model_id", ["da2-metric-tiny", "da3-tiny", "da3-metric-tiny", "da3-mono-tiny"])
def test_fp16_guards_are_bit_exact_in_fp32_for_every_family(model_id):
    from depthport.build import build
    from depthport.registry import get_spec
    from depthport.rewrites import default_rewrites

    hw = get_spec(model_id).default_hw
    x = torch.randn(1, 3, *hw, generator=torch.Generator().manual_seed(7))
    plain = build(model_id, hw).model
    safe = build(model_id, hw, rewrites=default_rewrites(fp16_safe=("norm", "attention"))).model
    assert sum(getattr(m, "guarded", False) for m in safe.modules()) > 0
    with torch.no_grad():
        a, b = plain(x), safe(x)
    for u, v in zip(*(o if isinstance(o, (tuple, list)) else (o,) for o in (a, b))):
        assert torch.equal(u, v)
