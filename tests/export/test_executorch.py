"""ExecuTorch targets on the tiny model: export -> delegation report -> run through executorch.runtime -> compare."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depthport.build import build
from depthport.export.executorch import backend_form
from depthport.export.targets import ExportContext, load_all
from depthport.preprocess import InputError, to_tensor
from depthport.rewrites import default_rewrites
from depthport.runtimes import load_runner
from depthport.core.images import builtin_image

HW = (56, 70)
FP16_CASTS = {"dim_order_ops__to_dim_order_copy_default"}  # the fp32 -> fp16 input and fp16 -> fp32 output casts


def pearson(a, b) -> float:
    return float(np.corrcoef(np.ravel(a), np.ravel(b))[0, 1])


def rel_l2(a, b) -> float:
    return float(np.linalg.norm(np.ravel(a) - np.ravel(b)) / np.linalg.norm(np.ravel(b)))


@pytest.fixture(scope="module")
def built():
    return build("da2-tiny", HW)


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    return to_tensor(builtin_image("chelsea"), HW)


@pytest.fixture(scope="module")
def eager(built, image) -> np.ndarray:
    with torch.no_grad():
        return built.model(torch.from_numpy(image)).numpy()


@pytest.fixture(scope="module")
def exported(built, tmp_path_factory):
    targets = load_all()
    ctx = ExportContext(built, tmp_path_factory.mktemp("executorch"), "da2_tiny")
    entries = {name: targets[name](ctx) for name in ("xnnpack-fp32", "xnnpack-fp16", "xnnpack-int8")}
    return ctx, entries


def run(ctx, entry, image) -> np.ndarray:
    runner = load_runner(ctx.out_dir / entry["file"], threads=1)
    assert runner.input_shape == (1, 3, *HW)
    out = runner.run(image)
    assert out.dtype == np.float32 and out.shape == (1, *HW)
    return out


def test_backend_form_is_exact(built, image, eager):
    with torch.no_grad():
        out = backend_form(built.model)[0](torch.from_numpy(image)).numpy()
    assert rel_l2(out, eager) < 1e-6


def xnnpack_transposes(path) -> list[tuple[int, bool]]:
    """(rank, fed by another transpose) of every XNNPACK transpose in a .pte's delegate graphs."""
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader

    from depthport.bench.macs_pte import _delegate_payloads, _graph_json

    out = []
    for payload in _delegate_payloads(path.read_bytes())[0]:
        header = XNNHeader.from_bytes(payload[:XNNHeader.EXPECTED_LENGTH])
        nodes = _graph_json(payload[header.flatbuffer_offset:header.flatbuffer_offset + header.flatbuffer_size])["xnodes"]
        transposed = {int(n["xnode_union"]["output_id"]) for n in nodes if n["xnode_union_type"] == "XNNStaticTranspose"}
        out += [(len(n["xnode_union"]["perm"]), int(n["xnode_union"]["input_id"]) in transposed)
                for n in nodes if n["xnode_union_type"] == "XNNStaticTranspose"]
    return out


def test_attention_keys_are_transposed_once(built, exported, image, eager):
    """The backend form makes K^T with one permute, bit for bit the same model; the .pte then has no 3-D
    transpose of a transpose (ExecuTorch used to lower K^T as two: 12 extra XNNPACK transposes for ViT-S)."""
    module, changes = backend_form(built.model)
    with torch.no_grad():
        assert np.array_equal(module(torch.from_numpy(image)).numpy(), eager)
    assert any("attention keys" in c for c in changes)
    ctx, _ = exported
    transposes = xnnpack_transposes(ctx.files["xnnpack-fp32"])
    assert sum(rank == 3 for rank, _ in transposes) == 4 * 4  # per block: Q, K, V heads and the heads' merge
    assert not any(rank == 3 and chained for rank, chained in transposes)


def test_fp16_form_survives_token_deviations_beyond_256(built, image):
    """(x - mean)^2 overflows fp16 past |x - mean| = 256; the fp16 form pre-scales its norms so it does not, and so
    does the default export's residual stream, carried k times smaller (fp16_safe_stream)."""
    unguarded = [n for n in default_rewrites() if n != "fp16_safe_stream"]
    stressed = build("da2-tiny", HW, built.weights, rewrites=unguarded)
    default = build("da2-tiny", HW, built.weights)
    x = torch.from_numpy(image)
    with torch.no_grad():
        for model in (stressed.model, default.model):
            model.encoder.patch_embed.weight.mul_(150)
            model.encoder.patch_embed.bias.mul_(150)
        ref = stressed.model(x).numpy()
        streamed = backend_form(default.model, sigmoid_gelu=True, fp16_io=True)[0](x).numpy()
        tokens = stressed.model.encoder.embed(x)
        assert float((tokens - tokens.mean(-1, keepdim=True)).abs().max()) > 256
        plain = backend_form(stressed.model, sigmoid_gelu=True, fp16_io=True)[0](x).numpy()
        safe = backend_form(stressed.model, fp16_range_norm=True, sigmoid_gelu=True, fp16_io=True)[0](x).numpy()
    assert not pearson(plain, ref) > 0.99  # the unscaled norm does break: the test can see the failure
    assert pearson(safe, ref) > 0.999 and pearson(streamed, ref) > 0.999


def test_xnnpack_fp32_is_one_delegate_and_matches_eager(exported, image, eager):
    ctx, entries = exported
    entry = entries["xnnpack-fp32"]
    assert entry["file"] == "da2_tiny_xnnpack_fp32.pte" and entry["precision"] == "fp32"
    assert entry["delegation"]["portable"] == 0, entry["delegation"]["portable_ops"]
    assert entry["delegation"]["subgraphs"] == 1 and entry["delegation"]["coverage"] == 1.0
    assert rel_l2(run(ctx, entry, image), eager) <= 1e-5


def test_xnnpack_fp16_keeps_every_norm_on_xnnpack_and_is_right(exported, image, eager):
    """Regression guard: the portable fp16 layer norm of executorch 1.5.1 is silently wrong for C >= 256, so no
    norm-like op may leave the delegate in fp16; only dtype casts run on portable kernels: the two I/O casts and
    the casts up into the FP32 head, the file's second XNNPACK subgraph (export.fp32_head)."""
    from depthport.check.delegation import delegation_verdict

    ctx, entries = exported
    entry = entries["xnnpack-fp16"]
    report = entry["delegation"]
    assert entry["precision"] == "fp16"
    assert set(report["portable_ops"]) <= FP16_CASTS, report["portable_ops"]
    assert report["subgraphs"] == 2 and delegation_verdict(report, "XNNPACK").state == "pass"
    assert pearson(run(ctx, entry, image), eager) >= 0.999


def test_xnnpack_int8_is_delegated_and_close(exported, image, eager):
    ctx, entries = exported
    entry = entries["xnnpack-int8"]
    assert entry["precision"] == "int8"
    assert entry["delegation"]["portable"] == 0, entry["delegation"]["portable_ops"]
    out = run(ctx, entry, image)
    ratio = np.maximum(out / eager, eager / out)
    assert np.mean(ratio < 1.25) >= 0.95
    assert pearson(out, eager) >= 0.99


def test_runner_rejects_wrong_shape_bad_file_and_a_second_thread_count(exported, tmp_path):
    ctx, entries = exported
    path = ctx.out_dir / entries["xnnpack-fp32"]["file"]
    runner = load_runner(path, threads=1)
    with pytest.raises(InputError, match="takes input"):
        runner.run(np.zeros((1, 3, 28, 42), np.float32))
    bad = tmp_path / "broken.pte"
    bad.write_bytes(b"not a program")
    with pytest.raises(InputError):
        load_runner(bad, threads=1)
    # The XNNPACK threadpool is process-wide and bound at load: resizing it under a loaded method would free it.
    with pytest.raises(RuntimeError, match="process-wide"):
        load_runner(path, threads=3)
    del runner
    assert load_runner(path, threads=3).run(np.zeros((1, 3, *HW), np.float32)).shape == (1, *HW)


def test_coreml_builds_pte_and_mlpackage(built, tmp_path):
    ctx = ExportContext(built, tmp_path, "da2_tiny")
    try:
        import coremltools  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match="coreml target needs coremltools"):
            load_all()["coreml"](ctx)
        return
    entry = load_all()["coreml"](ctx)
    assert (tmp_path / "da2_tiny_coreml.pte").is_file() and entry["precision"] == "fp16"
    assert entry["delegation"]["portable"] == 0 and entry["delegation"]["subgraphs"] == 1
    package = entry["mlpackage"]
    assert (tmp_path / package["file"] / "Manifest.json").is_file()
    assert package["inputs"]["image"] == {"shape": [1, 3, *HW], "dtype": "float32"}
    assert package["outputs"]["depth"] == {"shape": [1, *HW], "dtype": "float32"}
    assert entry["runnable_here"] is False and "not measured" in entry["parity_note"]


def test_fp16_pte_measured_against_the_xnnpack_prediction(built, exported):
    """Where this CPU computes FP16 (avx512_fp16, ARMv8.2), the prediction of XNNPACK's f16 kernels agrees with
    the measured fp16 .pte within 1.5x per image. On a storage-only CPU the file is computed in FP32 between FP16
    tensors: the FP32-accumulation prediction agrees with it within 1.5x per image, and the measured error stays
    well below what FP16 arithmetic is predicted to cost (what this CPU must give)."""
    from depthport.check.fp16_compute import xnnpack_fp16_form
    from depthport.core.machine import fp16_arithmetic
    from depthport.fp16 import simulate_fp16

    ctx, entries = exported
    names = ("astronaut", "camera", "chelsea")
    xs = [to_tensor(builtin_image(n), HW) for n in names]
    with torch.no_grad():
        fp32 = [built.model(torch.from_numpy(x)).numpy() for x in xs]
    runner = load_runner(ctx.out_dir / entries["xnnpack-fp16"]["file"], threads=1)
    measured = [rel_l2(runner.run(x), ref) for x, ref in zip(xs, fp32)]
    form, inputs = xnnpack_fp16_form(built.model), [torch.from_numpy(x) for x in xs]
    predicted = {mode: [m["rel_l2"] for m in simulate_fp16(form, inputs, accumulate=mode).per_image]
                 for mode in ("xnnpack", "fp32")}
    found = fp16_arithmetic()
    # FP16 arithmetic: XNNPACK's FMA chain; storage only: FP16 tensors between ops, FP32 inside them
    expected = predicted["xnnpack" if found["arithmetic"] else "fp32"]
    for name, m, p in zip(names, measured, expected):
        assert 1 / 1.5 <= p / m <= 1.5, f"{name}: predicted {p:.3g}, measured {m:.3g} ({found['reason']})"
    if not found["arithmetic"]:  # per image: FP16 storage costs well under half of what FP16 arithmetic does
        assert all(m < p / 2 for m, p in zip(measured, predicted["xnnpack"])), (measured, predicted, found["reason"])


@pytest.mark.parametrize("hardware", ["x86 avx512_fp16", "arm64 neonfp16arith (qemu)"])
@pytest.mark.parametrize("model_id", ["da2-tiny", "da3-tiny"])
def test_xnnpack_prediction_matches_fp16_arithmetic_measured_on_a_cpu_that_has_it(model_id, hardware):
    """On any CPU, the prediction of XNNPACK's f16 kernels agrees within 1.5x per image with the error that
    FP16 arithmetic gave the same tiny file where it is computed (``calibration.json``, written by
    ``benchmarks/fp16_floor.py --record``): on a Sapphire Rapids (avx512_fp16 kernels) and on an emulated ARMv8.2
    CPU (``--arm64``: ExecuTorch's aarch64 build, neonfp16arith kernels, as a phone's CPU)."""
    from depthport.check.fp16_compute import xnnpack_fp16_form
    from depthport.fp16 import simulate_fp16
    from depthport.export.executorch import FORMS
    from depthport.fp16.calibration import matching

    entry = matching(model_id, HW, hardware=hardware, form=FORMS["xnnpack-fp16"])
    assert entry is not None, f"no FP16-arithmetic measurement of {model_id} on {hardware}"
    assert {"avx512_fp16"} <= set(entry["isa"]) if hardware.startswith("x86") else {"asimdhp"} <= set(entry["isa"])
    tiny = build(model_id, HW)
    normalize = "fold_input_normalization" not in tiny.rewrites
    xs = [torch.from_numpy(to_tensor(builtin_image(n), HW, normalize=normalize)) for n in entry["images"]]
    mode = "xnnpack" if hardware.startswith("x86") else "xnnpack-arm"  # ARM flushes FP16 subnormals, x86 keeps them
    predicted = simulate_fp16(xnnpack_fp16_form(tiny.model), xs, accumulate=mode).per_image
    for name, p in zip(entry["images"], predicted):
        m = entry["per_image"]["rel_l2"][name]
        assert 1 / 1.5 <= p["rel_l2"] / m <= 1.5, f"{model_id} {name}: predicted {p['rel_l2']:.3g}, measured {m:.3g}"


def test_fp16_pte_calibration_figures_are_kept_and_stated():
    """The figures measured on FP16 arithmetic that the full-size prediction is checked against (benchmarks/
    fp16_floor.py) live in the package, with the CPU and versions they were measured with."""
    from depthport.export.executorch import FORMS
    from depthport.export.targets import FP16_PTE_TARGETS
    from depthport.fp16.calibration import load_calibration, matching, target_of

    cal = load_calibration()
    assert cal and all({"cpu", "isa", "versions", "model", "size", "images", "worst", "hardware", "form"} <= set(c)
                       for c in cal)
    assert all(target_of(c) in FP16_PTE_TARGETS for c in cal)
    split = [c for c in cal if target_of(c) == "xnnpack-fp16-split"]  # found under its own target alone
    assert split, "the split file's measurement on FP16 arithmetic is kept"
    for c in split:
        key = (c["model"], c["size"], c["weights"], c["hardware"])
        assert matching(*key, "xnnpack-fp16-split", form=FORMS["xnnpack-fp16-split"]) == c
        assert matching(*key, "xnnpack-fp16", form=FORMS["xnnpack-fp16"]) != c
        assert matching(*key, "xnnpack-fp16-split", form={**FORMS["xnnpack-fp16-split"], "split_k": 8}) is None
    assert any("avx512_fp16" in c["isa"] for c in cal)
    arm = [c for c in cal if c["hardware"] == "arm64 neonfp16arith (qemu)"]
    assert arm and all("qemu" in c["versions"] and "to 2048" in c["cpu"] for c in arm)


def test_fp16_sentinel_reads_what_this_cpu_accumulates_and_agrees_with_its_flags():
    """The sentinel file sums 4096 ones in FP16: 2048 where XNNPACK accumulates in FP16 (avx512_fp16, ARMv8.2),
    4096 where it only stores FP16. Its answer is what the FP16 verdicts use; where the CPU flags say otherwise,
    the reason says that the runtime decided."""
    from depthport.check.fp16_compute import fp16_arithmetic_here
    from depthport.core.machine import fp16_arithmetic
    from depthport.runtimes import fp16_sentinel

    total = fp16_sentinel.host_total()
    assert total in (2048.0, 4096.0)
    here, flags = fp16_arithmetic_here(), fp16_arithmetic()
    assert here["arithmetic"] is fp16_sentinel.accumulates_in_fp16(total)
    assert f"to {total:g}" in here["sentinel"] and here["sentinel"] in here["reason"]
    if bool(flags["arithmetic"]) is not here["arithmetic"]:  # flags and runtime disagree: the runtime decided
        assert "the runtime disagrees" in here["reason"]


def test_fp16_sentinel_is_lowered_once_and_lowered_again_when_damaged(tmp_path, monkeypatch):
    """The sentinel .pte is kept in the evidence cache's folder (one lowering per ExecuTorch version); a kept file
    that does not load is replaced, and the sum is the same."""
    from depthport.runtimes import fp16_sentinel

    monkeypatch.setenv("DEPTHPORT_CACHE", str(tmp_path / "references"))
    path = fp16_sentinel.sentinel_file()
    assert path.is_file() and path.parent == tmp_path / "references" / "sentinel"
    stamp = path.stat().st_mtime_ns
    assert fp16_sentinel.sentinel_file().stat().st_mtime_ns == stamp  # kept, not lowered again
    total = fp16_sentinel._run(path)
    path.write_bytes(b"not a program")
    fp16_sentinel.host_total.cache_clear()
    try:
        assert fp16_sentinel.host_total() == total and path.read_bytes()[4:8] == b"ET12"
    finally:
        fp16_sentinel.host_total.cache_clear()


def test_arm64_emulation_says_why_it_cannot_run(tmp_path, monkeypatch):
    """Without the emulated machine (benchmarks/arm64/setup.sh), the arm64 runner names what is missing and
    refuses with an InputError instead of running anything."""
    from depthport.errors import InputError
    from depthport.runtimes import arm64

    monkeypatch.setenv(arm64.ROOT_ENV, str(tmp_path / "nothing-here"))
    ok, reason = arm64.availability()
    assert ok is False and ("setup.sh" in reason)
    with pytest.raises(InputError, match="emulated ARMv8.2"):
        arm64.run_pte(tmp_path / "m.pte", [(np.zeros((1, 3, 8, 8), np.float32),)])


def test_split_reductions_are_exact_and_shorten_fp16_accumulation(built, image):
    """The fp16 forms (export.split_k, the head in FP32: export.fp32_head): xnnpack-fp16 cuts reductions longer than
    128 products, xnnpack-fp16-split those longer than 16; both are the same model in FP32, each cut lowers the
    predicted error on XNNPACK's FP16 arithmetic, and the FP32 head is not split."""
    from depthport.check.fp16_compute import xnnpack_fp16_form
    from depthport.export.executorch import FORMS
    from depthport.export.fp32_head import Fp32Entry
    from depthport.fp16 import simulate_fp16

    x = torch.from_numpy(image)
    bare = backend_form(built.model, **{**FORMS["xnnpack-fp16"], "fp16_io": False, "split_k": None,
                                        "fp32_head": False})[0]
    fp16, split = xnnpack_fp16_form(built.model), xnnpack_fp16_form(built.model, target="xnnpack-fp16-split")
    cuts = [sum("Split" in type(m).__name__ for m in f.modules()) for f in (bare, fp16, split)]
    assert cuts[0] == 0 < cuts[1] < cuts[2], cuts
    for form in (fp16, split):
        assert isinstance(form.head, Fp32Entry) and not any("Split" in type(m).__name__ for m in form.head.modules())
    assert "SplitConv2d" in {type(m).__name__ for m in backend_form(
        built.model, **{**FORMS["xnnpack-fp16-split"], "fp32_head": False})[0].modules()}
    with torch.no_grad():
        assert max(rel_l2(f(x).numpy(), bare(x).numpy()) for f in (fp16, split)) < 1e-6
    errors = [simulate_fp16(m, x, accumulate="xnnpack").rel_l2 for m in (bare, fp16, split)]
    assert errors[2] < errors[1] < 0.8 * errors[0], errors
    for target, chunk in (("xnnpack-fp16", 128), ("xnnpack-fp16-split", 16)):
        _, changes = backend_form(built.model, **FORMS[target])
        assert any(f"longer than {chunk} products" in c and "float32-accumulated mean" in c for c in changes)


def test_split_parts_are_exact_and_lower_to_one_xnnpack_subgraph(tmp_path):
    """Each split op (a linear, a convolution, an attention matmul, a norm's mean) equals the unsplit op, padding
    included, and the fp16 module of all four lowers to one XNNPACK subgraph (only the I/O casts outside) that
    ExecuTorch runs to FP16 precision."""
    from torch import nn

    from depthport.export.executorch import Fp16IO, LinearMeanNorm, lower_xnnpack, write_pte
    from depthport.export.split_k import SplitConv2d, SplitLinear
    from depthport.models.layers import ScaleNorm, group_sum, matmul_split

    g = torch.Generator().manual_seed(3)
    parts = torch.randn(5, 3, 4, generator=g, dtype=torch.float64)
    assert torch.allclose(group_sum(parts), parts.sum(0), rtol=1e-12, atol=1e-12)
    a, b = torch.randn(2, 7, 37, generator=g, dtype=torch.float64), torch.randn(2, 37, 5, generator=g, dtype=torch.float64)
    assert torch.allclose(matmul_split(a, b, 8), a @ b, rtol=1e-12, atol=1e-12)  # 37 = 5 chunks of 8, padded by 3

    class Parts(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = SplitConv2d(nn.Conv2d(10, 6, 3, padding=1), 18)  # 2 channels x 9 taps: 5 groups
            self.linear = SplitLinear(nn.Linear(6, 12), 4)  # 2 chunks of 3
            norm = LinearMeanNorm(ScaleNorm(12, 1e-6), fp16_range=True)
            norm.grouped_mean = True
            self.norm = norm

        def forward(self, x):
            t = self.conv(x).reshape(6, 42).transpose(0, 1)  # (tokens, 6)
            t = self.norm(self.linear(t)).reshape(1, 42, 12)
            return matmul_split(t, t.transpose(1, 2), 5)  # 12 = 3 chunks of 4 (padded by 0)

    torch.manual_seed(4)
    module = Parts().eval()
    whole = {"conv": module.conv, "linear": module.linear}
    x = torch.randn(1, 10, 6, 7, generator=g)  # 42 tokens
    conv = nn.Conv2d(10, 6, 3, padding=1)
    with torch.no_grad():
        conv.weight.copy_(module.conv.weight.reshape(5, 6, 2, 3, 3).transpose(0, 1).reshape(6, 10, 3, 3))
        conv.bias.copy_(module.conv.bias.reshape(6))
        assert rel_l2(whole["conv"](x).numpy(), conv(x).numpy()) < 1e-6
        t = torch.randn(9, 6, generator=g)
        w = module.linear.weight.reshape(6, 12)
        assert rel_l2(whole["linear"](t).numpy(), (t @ w + module.linear.bias).numpy()) < 1e-6
        expected = module(x).numpy()
    manager, report = lower_xnnpack(Fp16IO(module), x)
    assert report["subgraphs"] == 1 and set(report["portable_ops"]) <= FP16_CASTS
    out = load_runner(write_pte(manager, tmp_path / "parts.pte"), threads=1).run(x.numpy())
    assert out.shape == expected.shape and rel_l2(out, expected) < 1e-2


def test_patch_embedding_and_output_convs_split_exactly_into_one_xnnpack_subgraph(tmp_path):
    """A patchifying convolution (kernel = stride, a 14x14 patch is 196 products per channel) becomes a split
    Linear over its patches, a convolution with one or two output maps one input channel per group; both equal
    the unsplit convolution (trailing rows and columns the patches do not cover dropped, as Conv2d drops them),
    predict a smaller XNNPACK FP16 error, and lower to one XNNPACK subgraph."""
    from torch import nn

    from depthport.export.executorch import Fp16IO, lower_xnnpack, write_pte
    from depthport.export.split_k import SplitConv2d, SplitPatchConv, split_reductions
    from depthport.fp16 import simulate_fp16

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, 8, 7, stride=7)  # 147 products a patch
            self.out = nn.Conv2d(8, 2, 1)  # 8 products, two maps

        def forward(self, x):
            return self.out(self.patch(x))

    torch.manual_seed(5)
    whole = Head().eval()
    split = Head().eval()
    split.load_state_dict(whole.state_dict())
    assert split_reductions(split, 16, 36)["conv"] == 2
    assert isinstance(split.patch, SplitPatchConv) and isinstance(split.out, SplitConv2d) and split.out.groups == 8
    x = torch.randn(1, 3, 28, 35)  # 4x5 patches
    with torch.no_grad():
        w64, s64 = Head().double().eval(), Head().double().eval()
        w64.load_state_dict(whole.state_dict())
        s64.load_state_dict(whole.state_dict())
        split_reductions(s64, 16, 36)
        for shape in ((1, 3, 28, 35), (1, 3, 30, 37)):  # and with 2 rows and 2 columns left over
            x64 = torch.randn(shape, dtype=torch.float64)
            assert torch.allclose(s64(x64), w64(x64), rtol=1e-12, atol=1e-12)
        expected = split(x)
    errors = [simulate_fp16(m, x, accumulate="xnnpack").rel_l2 for m in (whole, split)]
    assert errors[1] < errors[0]
    manager, report = lower_xnnpack(Fp16IO(split), x)
    assert report["subgraphs"] == 1 and set(report["portable_ops"]) <= FP16_CASTS
    out = load_runner(write_pte(manager, tmp_path / "head.pte"), threads=1).run(x.numpy())
    assert out.shape == expected.shape == (1, 2, 4, 5) and rel_l2(out, expected.numpy()) < 1e-2


def test_check_stage_predicts_each_fp16_pte_target_in_its_own_form(built, tmp_path):
    """The check stage's XNNPACK prediction simulates the form each fp16 .pte target lowers: once per target, and
    the split form predicts the smaller error."""
    from depthport.check.stage import fp16_prediction

    ctx = ExportContext(built, tmp_path, "da2_tiny")
    plain = fp16_prediction(ctx, "xnnpack", "xnnpack-fp16")
    split = fp16_prediction(ctx, "xnnpack", "xnnpack-fp16-split")
    assert plain is not split and fp16_prediction(ctx, "xnnpack", "xnnpack-fp16-split") is split
    assert plain["accumulate"] == split["accumulate"] == "xnnpack"
    assert 0 < split["rel_l2"] < plain["rel_l2"]


def test_small_weights_lifted_out_of_fp16_subnormals_exactly():
    """``lift_small_weights``: a layer holding weights below 2^-14 (which XNNPACK on ARM reads as 0) computes with
    them 2^k larger and scales its output back: bit for bit the same in FP32, and none of its weights is flushed in
    FP16 any more. Layers without such weights are left alone."""
    from torch import nn

    from depthport.export.executorch import LIFT_LIMIT, lift_small_weights
    from depthport.fp16.kernels import FP16_TINY
    from depthport.fp16.simulate import round_fp16

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(8, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 1))
    with torch.no_grad():
        model[2].weight.mul_(0.01)
        model[2].weight[0, :2] = torch.tensor([3e-5, -2e-5])[:, None, None]
    x = torch.randn(1, 8, 12, 12)
    before = model(x)
    flushed = (round_fp16(model[2].weight.detach(), True) == 0).sum().item()
    assert flushed >= 2 and lift_small_weights(model) == 1
    assert isinstance(model[2], nn.Conv2d) and model[2].out_channels == 1 and type(model[0]) is nn.Conv2d
    assert type(model[2]) is not nn.Conv2d and model[2].out_scale.item() < 1  # the same layer, output scaled back
    w = model[2].weight.detach()
    assert LIFT_LIMIT / 2 <= w.abs().max() < LIFT_LIMIT and w.abs()[w != 0].min() >= FP16_TINY
    assert (round_fp16(w, True) == 0).sum().item() == 0
    assert torch.equal(model(x), before)
