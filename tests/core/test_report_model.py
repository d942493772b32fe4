"""core.report_model: report.json's typed view, built by one generic loader."""

from __future__ import annotations

import pytest

from depthport.core.report_model import (Fp16Prediction, GpuRuntime, Latency, NotMeasured, Parity, dump, load,
                                         load_report)
from depthport.core.schema import FAIL, UNVERIFIED, ParityJson, ReportError


def test_loader_reads_sections_alternatives_and_defaults():
    report = load_report({
        "model": "m", "input_shape": [1, 3, 28, 28], "random_weights": True, "extra_key": 1, "bench": None,
        "artifacts": [
            {"file": "a.tflite", "target": "litert-fp32", "parity": {"pearson_worst": 0.99, "rel_l2_pooled": 1e-3,
                                                                     "vs_reference_fp64": {"rel_l2_pooled": 2e-7}},
             "latency_ms": {"median": 12.5, "threads": 2},
             "checks": {"parity": {"state": FAIL, "reasons": ["too far"], "required": True}}},
            {"file": "b.pte", "parity": {"not_measured": "skipped"}, "latency_ms": {"error": "no runtime"}}]})
    a, b = report.artifacts
    assert report.input_shape == (1, 3, 28, 28) and report.random_weights and report.bench is None
    assert isinstance(a.parity, Parity) and a.measured_parity.rel_l2_pooled == 1e-3
    assert a.parity.vs_reference_fp64.rel_l2_pooled == 2e-7 and a.median_ms == 12.5
    assert isinstance(a.latency_ms, Latency) and a.latency_ms.rounds == "?"  # default of a missing field
    assert a.verdict("parity").state == FAIL and a.verdict("gpu_static") is None and a.kind == "tflite"
    assert b.parity == NotMeasured("skipped") and b.latency_ms == NotMeasured("no runtime")
    assert b.measured_parity is None and b.median_ms is None and b.status == UNVERIFIED and b.checks == {}


def test_loader_refuses_a_bad_verdict_and_a_missing_model():
    with pytest.raises(ReportError):
        load_report({"model": "m", "artifacts": [{"file": "a", "checks": {"parity": {"state": "maybe"}}}]})
    with pytest.raises(TypeError):
        load_report({"input_shape": [1, 3, 8, 8]})


def test_dump_is_the_loaders_inverse():
    prediction = load(Fp16Prediction, {"rel_l2": 0.3, "overflow_ops": [{"layer": "head", "op": "mul", "count": 4}],
                                       "headroom_by_op": [{"op": "mul", "max_abs": 7e4}], "unknown": 1})
    assert prediction.overflow_ops[0].op == "mul" and load(Fp16Prediction, dump(prediction)) == prediction
    report = load_report({"model": "m", "input_shape": [1, 3, 8, 8], "artifacts": [
        {"file": "a.onnx", "parity": {"error": "crashed", "cause": "could not run"},
         "checks": {"parity": {"state": FAIL, "reasons": ["crashed"]}}}]})
    assert load_report(dump(report)) == report and dump(report)["artifacts"][0]["input_dims"] == []


def test_gpu_runtime_and_parity_summary():
    runtime = load(GpuRuntime, {"fully_delegated": False, "rejected_ops": [{"op": "GELU", "reason": "no"}],
                                "shape": [1, 3, 8, 8], "note": "not fully delegated"})
    assert runtime.rejected_ops[0].op == "GELU" and runtime.shape == (1, 3, 8, 8) and runtime.numeric_ok is None
    parity = {"pearson_worst": 0.9, "per_image": [{}], "vs_eager": {}, "vs_reference_fp64": {}, "compute": "cpu"}
    assert ParityJson(parity).summary() == {"pearson_worst": 0.9, "compute": "cpu"}


def test_gpu_runtime_dump_leaves_out_the_setting_a_run_did_not_reach():
    """No device: the eight result fields only; a run: its setting after them, in the order run_gpu_check wrote."""
    assert list(dump(GpuRuntime(note="no Vulkan device available"))) == [
        "fully_delegated", "rejected_ops", "rel_l2_vs_cpu", "pearson_vs_cpu", "shape", "numeric_file", "numeric_ok",
        "note"]
    ran = GpuRuntime(fully_delegated=True, shape=(1, 3, 8, 8), adapter="SwiftShader", compile_s=0.5,
                     precision="fp32", tolerance=1e-4, vulkan="swiftshader", wall_s=2.0)
    assert list(dump(ran))[-6:] == ["adapter", "compile_s", "precision", "tolerance", "vulkan", "wall_s"]
    assert dump(ran)["shape"] == [1, 3, 8, 8] and load(GpuRuntime, dump(ran)) == ran
