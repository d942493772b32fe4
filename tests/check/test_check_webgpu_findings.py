"""Two constructs the WebGPU accelerator compiles but computes wrongly, found while building depthport's
graphs: the static rules flag them, and (where SwiftShader is set up) the real accelerator shows why."""

import pytest
import torch

from depthport.check.static import check_static
from depthport.check.verdict import check_tflite
from test_check_static import export
from helpers import skip_or_fail


class BroadcastBatchMatmul(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 16, 8))

    def forward(self, x):
        return x.reshape(12, 16) @ self.w


class Rank2ConstantAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.randn(12, 16))

    def forward(self, x):
        return x.reshape(12, 16) + self.pos


class Rank4ConstantAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.randn(1, 3, 4, 16))

    def forward(self, x):
        return x + self.pos


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("webgpu")
    return {
        "bmm": export(BroadcastBatchMatmul(), (1, 3, 4, 16), tmp / "bmm.tflite"),
        "add2": export(Rank2ConstantAdd(), (1, 3, 4, 16), tmp / "add2.tflite"),
        "add4": export(Rank4ConstantAdd(), (1, 3, 4, 16), tmp / "add4.tflite"),
    }


@pytest.mark.parametrize("name,rule", [("bmm", "batch-matmul-broadcast"), ("add2", "rank2-constant-operand")])
def test_rule_flags_the_construct(files, name, rule):
    found = [v for v in check_static(files[name]) if v.rule == rule]
    assert found and found[0].severity == "error" and "WebGPU" in found[0].source


def test_rank4_constant_add_is_clean(files):
    assert not [v for v in check_static(files["add4"]) if v.severity == "error"]


@pytest.mark.gpu
@pytest.mark.parametrize("name,wrong", [("bmm", True), ("add2", True), ("add4", False)])
def test_accelerator_agrees(files, name, wrong):
    runtime = check_tflite(files[name], run_gpu=True, timeout=120).runtime
    if runtime.fully_delegated is None:
        skip_or_fail(runtime.note)
    assert runtime.fully_delegated is True
    assert (runtime.rel_l2_vs_cpu > 1e-2) is wrong
