"""core.report_model: report.json's typed view, built by one generic loader."""

from __future__ import annotations

import dataclasses

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


def test_gpu_check_violations_typed_in_check_statics_order():
    """gpu_check's violations are ``Violation``s: written with the keys check_static always wrote, read back equal."""
    from depthport.core.report_model import GpuCheck, Violation

    found = GpuCheck((Violation(8, "FULLY_CONNECTED", "int8-weight-only-fc", "error", "device report", "weight-only",
                                "FLOAT32[21,32] -> FLOAT32[21,1]"),
                      Violation(33, "SLICE", "slice-rank-legacy", "warning", "gpu_compatibility.cc", "2D input", "")))
    data = dump(found)
    assert list(data) == ["violations"] and list(data["violations"][0]) == [
        "op_index", "op", "rule", "severity", "source", "detail", "shapes"]
    assert load(GpuCheck, data) == found and load(GpuCheck, data).violations[1].severity == "warning"
    assert load(GpuCheck, {}) == GpuCheck()


def test_browser_section_typed_in_report_jsons_order():
    """A web folder's ``browser`` section (``Browser``, its runs, their comparisons, the preprocessing check, the small
    re-export, the page as shown): report.json's keys in its order, the preprocessing and screenshot left out until
    there is one, and ``load(dump(x)) == x``."""
    import numpy as np

    from depthport.core import metrics
    from depthport.core.report_model import (Browser, BrowserRun, Comparison, PreprocessCheck, RunInfo, RunTime,
                                             Shown, SmallReexport)

    a = np.linspace(1, 2, 12).reshape(3, 4)
    summary = metrics.summarize([metrics.image_metrics(a * 1.001, a)])
    vs_cpu = Comparison(**summary)
    assert list(dump(vs_cpu)) == list(summary) and dump(vs_cpu) == summary  # metrics.summarize's order
    run = BrowserRun(name="webgpu-fp32", shape=(3, 4), info=RunInfo("LiteRT.js", "webgpu", "webgpu", True, "fp32", True),
                     time=RunTime(10.0, 2.0, 3, "SwiftShader"), file="small re-export 3x4", vs_cpu=vs_cpu,
                     vs_reference=vs_cpu)
    pre = PreprocessCheck(max_abs_diff=0.0, images=6, exact=True, method="PNG")
    assert list(dump(pre)) == ["max_abs_diff", "images", "exact", "method"] and load(PreprocessCheck, dump(pre)) == pre
    browser = Browser(browser="Chromium 1", flags=("--use-angle=swiftshader",), driver="playwright 1", fast_shaders=False,
                      adapter=None, runtime="litert.js", runtime_version="2.5.3", backends={"webgpu-fp32": run},
                      small_reexport=SmallReexport((3, 4), "SwiftShader"), shown=Shown("webgpu", ms=71.3))
    keys = ["browser", "flags", "driver", "fast_shaders", "adapter", "runtime", "runtime_version", "backends",
            "small_reexport", "shown"]
    assert list(dump(browser)) == keys and dump(browser)["adapter"] is None
    assert dump(browser)["shown"] == {"backend": "webgpu", "ms": 71.3}
    assert dump(Shown("wasm", error="page failed")) == {"backend": "wasm", "error": "page failed"}
    full = dataclasses.replace(browser, small_reexport=None, preprocess=pre, screenshot="shot.png")
    assert list(dump(full)) == keys + ["preprocess", "screenshot"] and dump(full)["small_reexport"] is None
    for section in (browser, full):
        assert load(Browser, dump(section)) == section
    assert load(Browser, dump(full)).backends["webgpu-fp32"].vs_reference.rel_l2_pooled == summary["rel_l2_pooled"]
