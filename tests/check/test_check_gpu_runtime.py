"""Runtime GPU check on the real LiteRT GPU accelerator (WebGPU over SwiftShader where there is no GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from depthport.check import check_tflite, parse_rejected_ops, run_gpu_check
from depthport.core.report_model import RejectedOp

from helpers import skip_or_fail, vulkan_or_skip
from test_check_static import IMAGE, ConvBlock, export, lazy_graphs

GPU_GRAPHS = ("conv", "expand", "index", "softmax_constant", "where_broadcast", "linear_add")


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """Lazily converted graphs by name (same modules as the static tests)."""
    return lazy_graphs(tmp_path_factory.mktemp("gpu_graphs"))


@pytest.fixture(scope="module")
def clean_runtime(graphs):
    """Runtime result of the clean graph; skips the module's GPU tests when no Vulkan device exists."""
    vulkan_or_skip()
    runtime = run_gpu_check(graphs("conv"), timeout=120)
    if runtime.fully_delegated is None and runtime.note.startswith("no Vulkan"):
        skip_or_fail(f"SwiftShader/Vulkan unavailable: {runtime.note}")
    return runtime


@pytest.mark.gpu
def test_clean_graph_is_fully_delegated_and_matches_cpu(graphs, clean_runtime):
    assert clean_runtime.fully_delegated is True, clean_runtime.note
    assert clean_runtime.rejected_ops == ()
    assert clean_runtime.rel_l2_vs_cpu <= 1e-5
    assert clean_runtime.pearson_vs_cpu >= 0.99999
    assert clean_runtime.precision == "fp32" and clean_runtime.numeric_ok is True
    assert clean_runtime.shape == tuple(IMAGE)
    assert clean_runtime.numeric_file == str(graphs("conv"))


@pytest.mark.gpu
@pytest.mark.parametrize(("graph", "rejected"), [
    ("expand", {"BROADCAST_TO"}),
    ("index", {"GATHER_ND"}),
    ("softmax_constant", {"SOFTMAX"}),
    ("where_broadcast", {"SELECT_V2"}),
])
def test_runtime_rejects_what_the_static_check_flags(graphs, clean_runtime, graph, rejected):
    result = check_tflite(graphs(graph), run_gpu=True, timeout=120)
    runtime = result.runtime
    assert runtime.fully_delegated is False
    assert {r.op for r in runtime.rejected_ops} == rejected
    assert rejected <= {v.op for v in result.violations if v.severity == "error"}
    assert result.gpu_clean is False


@pytest.mark.gpu
def test_small_shape_file_is_used_for_numerics(clean_runtime, tmp_path):
    module = ConvBlock()
    full = export(module, (1, 3, 32, 32), tmp_path / "full.tflite")
    small = export(module, IMAGE, tmp_path / "small.tflite")
    runtime = check_tflite(full, run_gpu=True, numeric_file=small, timeout=120).runtime
    assert runtime.fully_delegated is True
    assert runtime.numeric_file == str(small) and runtime.shape == tuple(IMAGE)
    assert runtime.rel_l2_vs_cpu <= 1e-5


@pytest.mark.gpu
def test_dynamic_range_int8_fc_is_delegated_but_wrong(graphs, clean_runtime):
    result = check_tflite(graphs("int8_dynamic_fc"), run_gpu=True, timeout=120)
    runtime = result.runtime
    assert runtime.fully_delegated is True
    assert runtime.rel_l2_vs_cpu > 1e-2 and runtime.numeric_ok is False
    assert result.gpu_clean is False


@pytest.mark.gpu
def test_weight_only_int8_fc_fails_graph_modification(graphs, clean_runtime):
    runtime = run_gpu_check(graphs("int8_weight_only_fc"), timeout=120)
    assert runtime.fully_delegated is False
    assert "Failed to modify graph with delegate" in runtime.note


@pytest.mark.gpu
def test_timeout_gives_no_verdict(graphs, clean_runtime):
    runtime = run_gpu_check(graphs("conv"), timeout=0.05)
    assert runtime.fully_delegated is None and "timed out" in runtime.note


@pytest.mark.gpu
def test_cli_run_gpu_json(graphs, clean_runtime):
    proc = subprocess.run([sys.executable, "-m", "depthport.cli", "check", str(graphs("expand")), "--run-gpu", "--json"],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 1
    runtime = json.loads(proc.stdout)["runtime"]
    assert runtime["fully_delegated"] is False and runtime["rejected_ops"][0]["op"] == "BROADCAST_TO"


@pytest.mark.gpu
def test_vulkan_without_driver_gives_reason(graphs, clean_runtime, monkeypatch, tmp_path):
    monkeypatch.setenv("VK_ICD_FILENAMES", str(tmp_path / "no_such_icd.json"))
    runtime = run_gpu_check(graphs("conv"), timeout=120)
    assert runtime.fully_delegated is None
    assert runtime.note.startswith("no Vulkan adapter")


def hide_swiftshader(monkeypatch, folder):
    """No SwiftShader anywhere depthport looks (an empty cache folder, no system Chromium)."""
    import depthport.runtimes.swiftshader as swiftshader

    monkeypatch.delenv("VK_ICD_FILENAMES", raising=False)
    monkeypatch.delenv("VK_DRIVER_FILES", raising=False)
    monkeypatch.setenv("DEPTHPORT_SWIFTSHADER_DIR", str(folder))
    monkeypatch.setattr(swiftshader, "SYSTEM_CHROMIUM", folder / "no-chromium")


def test_missing_swiftshader_is_not_measured_never_clean(graphs, monkeypatch, tmp_path):
    hide_swiftshader(monkeypatch, tmp_path)
    result = check_tflite(graphs("conv"), run_gpu=True)
    assert result.runtime.fully_delegated is None
    assert result.runtime.note.startswith("no Vulkan device available")
    assert result.static.state == "pass"
    assert result.runtime_verdict.state == "not measured" and result.runtime_verdict.cause == "could not run"
    assert result.verdict.state == "not measured" and result.gpu_clean is None


def test_check_cli_exit_status_says_could_not_check(graphs, tmp_path):
    """0 clean, 1 not clean, 2 could not check: a missing device is never a pass."""
    env = {**os.environ, "DEPTHPORT_SWIFTSHADER_DIR": str(tmp_path), "VK_ICD_FILENAMES": "", "VK_DRIVER_FILES": ""}
    cmd = [sys.executable, "-c", "import sys, depthport.runtimes.swiftshader as s, pathlib; "
           f"s.SYSTEM_CHROMIUM = pathlib.Path({str(tmp_path / 'none')!r}); "
           "from depthport.cli import main; sys.exit(main(['check', *sys.argv[1:]]))"]
    clean = subprocess.run(cmd + [str(graphs("conv")), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert clean.returncode == 0 and json.loads(clean.stdout)["outcome"] == "clean"
    dirty = subprocess.run(cmd + [str(graphs("expand")), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert dirty.returncode == 1 and json.loads(dirty.stdout)["outcome"] == "not clean"
    none = subprocess.run(cmd + [str(graphs("conv")), "--run-gpu", "--json"], capture_output=True, text=True, env=env,
                          timeout=120)
    result = json.loads(none.stdout)
    assert none.returncode == 2 and result["outcome"] == "could not check" and result["gpu_clean"] is None
    assert "no Vulkan device available" in result["verdict"]["reasons"][0]
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\0" * 64)
    broken = subprocess.run(cmd + [str(bad), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert broken.returncode == 2 and json.loads(broken.stdout)["outcome"] == "could not check"


def test_parse_rejected_ops():
    log = ("I0000 delegate_webgpu.cc:759] # of threads\n"
           "ERROR: Following operations are not supported by GPU delegate:\n"
           "MUL: Tensor dimensions must be less than 5. __main__.R5;3\n"
           "GATHER_ND: Operation is not supported.\n"
           "No operations will run on the GPU, and all 3 operations will run on the CPU.\n")
    assert parse_rejected_ops(log) == [
        RejectedOp("MUL", "Tensor dimensions must be less than 5. __main__.R5;3"),
        RejectedOp("GATHER_ND", "Operation is not supported."),
    ]
