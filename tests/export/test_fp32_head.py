"""The depth head in FP32 inside the fp16 .pte files (export.fp32_head), and DA3's XNNPACK files in one subgraph."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from depthport.build import build
from depthport.check.delegation import delegation_verdict
from depthport.core.images import builtin_image
from depthport.core.schema import FAIL, PASS
from depthport.export import executorch
from depthport.export.executorch import FORMS, Fp16IO, backend_form, write_pte
from depthport.export.fp32_head import Fp32Entry, keep_head_fp32
from depthport.fp16 import simulate_fp16
from depthport.fp16.simulate import fp16_copy
from depthport.preprocess import to_tensor
from depthport.runtimes import load_runner
from helpers import TINY_HW, rel_l2

HW = TINY_HW
CASTS = {"dim_order_ops__to_dim_order_copy_default"}


@pytest.fixture(scope="module")
def da3():
    return build("da3-tiny", HW)


@pytest.fixture(scope="module")
def camera(da3) -> torch.Tensor:
    normalize = "fold_input_normalization" not in da3.rewrites
    return torch.from_numpy(to_tensor(builtin_image("camera"), HW, normalize=normalize))


def _run(module, x, tmp_path, name):
    manager, report = executorch.lower_xnnpack(module, x)  # looked up at call time: the session's conversion memo
    return load_runner(write_pte(manager, tmp_path / f"{name}.pte"), threads=1).run(x.numpy()), report


@pytest.mark.parametrize("form", ["fp32", "xnnpack-fp16"])
def test_da3_xnnpack_files_leave_only_casts_to_portable_kernels(da3, camera, tmp_path, form):
    """DA3's RoPE rotation (a matmul ExecuTorch broadcast with expand_copy), its final LayerNorm's mean over rank-2
    tokens and its head's sliced depth-channel weights each left XNNPACK: a portable kernel and 2-3 subgraphs."""
    out, report = _run(backend_form(da3.model, **FORMS[form])[0], camera, tmp_path, form)
    assert report["subgraphs"] == 1 + FORMS[form].get("fp32_head", False), report  # the FP32 head: a second one
    assert set(report["portable_ops"]) <= (CASTS if form != "fp32" else set()), report["portable_ops"]
    with torch.no_grad():
        eager = da3.model(camera).numpy()
    assert rel_l2(out, eager) < (1e-5 if form == "fp32" else 1e-2)


def test_fp16_files_compute_the_head_in_fp32_behind_casts(da3, camera, tmp_path):
    """Both fp16 forms' head is FP32 (weights float32 and unrounded, inputs cast up), a second XNNPACK subgraph
    behind dtype casts only, which the delegation verdict accepts; FP16 arithmetic's predicted error drops, and the
    file computes what the model does. (The xnnpack-fp16 file is lowered; the split form differs only in its
    chunks, built here.)"""
    split, changes = backend_form(da3.model, **FORMS["xnnpack-fp16-split"])
    assert any("depth head in FP32" in c for c in changes) and isinstance(split.model.head, Fp32Entry)
    module, changes = backend_form(da3.model, **FORMS["xnnpack-fp16"])
    assert any("depth head in FP32" in c for c in changes)
    assert isinstance(module, Fp16IO) and isinstance(module.model.head, Fp32Entry)
    head = dict(module.model.head.module.named_parameters())
    original = dict(da3.model.head.named_parameters())
    assert head and all(p.dtype == torch.float32 for p in head.values())
    assert all(torch.equal(head[n], original[n]) for n in ("out_conv2.weight", "fusion.3.out_conv.weight"))
    assert all(p.dtype == torch.float16 for p in module.model.encoder.parameters())
    out, report = _run(module, camera, tmp_path, "xnnpack-fp16")
    assert report["subgraphs"] == 2 and set(report["portable_ops"]) <= CASTS, report
    verdict = delegation_verdict(report, "XNNPACK")
    assert verdict.state == PASS and "parted by dtype casts only" in verdict.reason
    with torch.no_grad():
        eager = da3.model(camera).numpy()
    assert rel_l2(out, eager) < 5e-3
    forms = [backend_form(da3.model, **{**FORMS["xnnpack-fp16"], "fp16_io": False, "fp32_head": h})[0]
             for h in (False, True)]
    errors = [simulate_fp16(f, camera, accumulate="xnnpack").rel_l2 for f in forms]
    assert errors[1] < 0.8 * errors[0], errors


def test_delegation_verdict_accepts_extra_subgraphs_only_behind_casts():
    parted = {"delegated": 500, "portable": 3, "subgraphs": 2, "coverage": 0.994,
              "portable_ops": {"dim_order_ops__to_dim_order_copy_default": 3}}
    assert delegation_verdict(parted, "XNNPACK").state == PASS
    broken = {**parted, "portable_ops": {"dim_order_ops__to_dim_order_copy_default": 2, "aten_mean_dim": 1}}
    assert delegation_verdict(broken, "XNNPACK").state == FAIL
    assert delegation_verdict({**parted, "subgraphs": 5}, "XNNPACK").state == FAIL
    small = {**parted, "delegated": 150, "coverage": 150 / 153}  # a tiny graph: its casts are 2 % of its ops
    assert delegation_verdict(small, "XNNPACK").state == PASS
    assert delegation_verdict({**broken, "delegated": 150, "coverage": 150 / 153}, "XNNPACK").state == FAIL


def test_fp16_simulation_keeps_the_fp32_part_unrounded():
    """From an ``Fp32Entry`` to the output the simulation computes in FP32 with the weights as they are: a model
    whose head is kept in FP32 simulates to a smaller error, and its head's weights are not rounded."""

    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(64, 64)
            self.head = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8))

        def forward(self, x):
            return self.head(self.body(x))

    torch.manual_seed(0)
    plain = Toy().eval()
    kept = Toy().eval()
    kept.load_state_dict(plain.state_dict())
    assert keep_head_fp32(kept) and not keep_head_fp32(nn.Linear(2, 2))
    sim = fp16_copy(kept)
    assert torch.equal(sim.head.module[0].weight, plain.head[0].weight)
    assert not torch.equal(sim.body.weight, plain.body.weight)
    x = torch.randn(32, 64)
    errors = [simulate_fp16(m, x, accumulate="xnnpack").rel_l2 for m in (plain, kept)]
    assert 0 < errors[1] < 0.7 * errors[0], errors
