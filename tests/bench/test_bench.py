"""Benchmarking: interleaved timing of real files, ratios, the export step, peak memory, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from depthport.bench import Entry, paired_ratio, peak_memory, sample_input, time_interleaved
from depthport.cli import main
from depthport.runtimes import load_runner



@pytest.fixture(scope="module")
def files(tiny_tflite, tmp_path_factory):
    """Two copies of the session's tiny LiteRT file."""
    path = tiny_tflite
    folder = tmp_path_factory.mktemp("bench")
    a, b = folder / "a.tflite", folder / "b.tflite"
    shutil.copy(path, a)
    shutil.copy(path, b)
    return a, b


class Recorder:
    """A runner that only records the order of calls (tests the harness, not a runtime)."""

    runtime = "recorder"

    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    def run(self, x):
        self.log.append(self.name)
        return x


def test_rounds_interleave_files_and_warmups_are_not_timed():
    log: list[str] = []
    x = sample_input((1, 2))
    records = time_interleaved([Entry("a", Recorder("a", log), x), Entry("b", Recorder("b", log), x)],
                               rounds=2, warmup=1, iters=2)
    assert log == ["a", "b"] + ["a", "a", "b", "b"] * 2
    assert [r["label"] for r in records] == ["a", "b"]
    with pytest.raises(ValueError):
        time_interleaved([], rounds=1)


class SlowRecorder(Recorder):
    def run(self, x):
        time.sleep(0.02)
        return super().run(x)


def test_a_slow_warm_up_makes_one_timed_call_a_round():
    log: list[str] = []
    x = sample_input((1, 2))
    records = time_interleaved([Entry("a", Recorder("a", log), x), Entry("slow", SlowRecorder("slow", log), x)],
                               rounds=2, warmup=1,
                               iters=3, slow_ms=10.0)
    assert log == ["a", "slow"] + ["a", "slow"] * 2 and [r["iters"] for r in records] == [1, 1]
    log.clear()
    records = time_interleaved([Entry("a", Recorder("a", log), x)], rounds=2, warmup=1, iters=3, slow_ms=10.0)
    assert log == ["a"] * 7 and records[0]["iters"] == 3


def test_a_runner_that_ran_already_gets_no_warm_up_and_its_call_time_decides_the_slow_mode():
    log: list[str] = []
    x = sample_input((1, 2))
    records = time_interleaved([Entry("a", Recorder("a", log), x), Entry("b", Recorder("b", log), x, warm_ms=50.0)],
                               rounds=2, warmup=1, iters=3, slow_ms=10.0)
    assert log == ["a"] + ["a", "b"] * 2  # b's verify call was its warm-up; 50 ms > slow_ms: one call a round
    assert [(r["warmup"], r.get("warm", False), r["iters"]) for r in records] == [(1, False, 1), (0, True, 1)]


def test_two_real_files_interleaved_with_medians_and_ratios(files):
    a = load_runner(files[0], threads=1, api="compiled")
    b = load_runner(files[1], threads=1, api="interpreter")
    records = time_interleaved([Entry("a", a, sample_input(a.input_shape)), Entry("b", b, sample_input(b.input_shape))],
                               rounds=3, warmup=1, iters=2)
    first, second = records
    assert (first["runtime"], second["runtime"]) == ("litert-compiled", "litert-interpreter")
    for rec in records:
        assert 0 < rec["min"] <= rec["median"] <= rec["max"]
        assert (rec["rounds"], rec["iters"], rec["warmup"]) == (3, 2, 1)
    assert first["ratio"]["median"] == 1.0
    assert second["ratio"]["median"] == pytest.approx(second["median"] / first["median"])


def test_export_step_records_latency_per_artifact(files, tiny_built):
    from depthport.bench import stage as step
    from depthport.export.context import StageOptions
    from depthport.export.targets import ExportContext, artifact_entry
    from depthport.pipeline import STAGES

    ctx = ExportContext(tiny_built, files[0].parent, "da2_tiny", options=StageOptions(threads=1))
    report = {"artifacts": [artifact_entry(ctx, f, f.stem, precision="fp32") for f in files]
              + [{"file": "missing.onnx", "target": "onnx", "precision": "fp32"}]}
    warm = load_runner(files[1], threads=1)
    ctx.warm_runners[report["artifacts"][1]["target"]] = (warm, 5.0)  # as verify leaves it
    step.apply(ctx, report)
    assert ctx.warm_runners == {}
    assert [a["latency_ms"]["warmup"] for a in report["artifacts"][:2]] == [step.WARMUP, 0]
    assert "warm_from" not in report["artifacts"][0]["latency_ms"]
    assert report["artifacts"][1]["latency_ms"]["warm_from"] == "verify"
    for art in report["artifacts"][:2]:
        lat = art["latency_ms"]
        assert lat["runtime"] == "litert-compiled" and lat["threads"] == 1
        assert 0 < lat["min"] <= lat["median"] <= lat["max"]
        assert lat["rounds"] == step.ROUNDS
        assert lat["gmac"] > 0 and lat["gmac_per_s"] == pytest.approx(lat["gmac"] * 1e3 / lat["median"])
        peak = report["bench"]["probe"]["peak_gmac_per_s"]
        assert lat["pct_of_peak"] == pytest.approx(100 * lat["gmac_per_s"] / peak)
        assert lat["cpu"].startswith(report["bench"]["machine"]["cpu"])
    assert "error" in report["artifacts"][2]["latency_ms"]
    assert report["bench"]["threads"] == 1 and report["bench"]["machine"]["threads"] == 1
    assert "4 layers instead of 16" in report["bench"]["probe"]["note"]
    skipped = {"artifacts": [artifact_entry(ctx, files[0], "a", precision="fp32")]}
    ctx.options.skip = frozenset({"bench"})
    next(s for s in STAGES if s.name == "bench").apply(ctx, skipped)  # the pipeline reads --skip, not the stage
    assert "latency_ms" not in skipped["artifacts"][0]


def test_paired_ratio_is_the_median_of_same_round_ratios():
    """Two rounds under load slow both files: the paired ratio still sees 2x, the ratio of the medians sees 1x."""
    base = {"round_medians": [10.0, 30.0, 30.0]}
    rec = {"round_medians": [20.0, 60.0, 30.0]}
    assert paired_ratio(rec, base) == 2.0 and paired_ratio(base, rec) == 0.5
    assert sorted(rec["round_medians"])[1] / sorted(base["round_medians"])[1] == 1.0


def test_peak_memory_in_a_child_process(files):
    mem = peak_memory(files[0], threads=1)
    assert mem["peak_rss_mb"] > 10 and mem["delta_mb"] >= 0
    assert "error" in peak_memory(files[0].with_suffix(".pte"), threads=1)


def test_cli_times_files_and_torch_and_writes_json(files, tmp_path, capsys):
    out = tmp_path / "bench.json"
    args = ["bench", *map(str, files), "--threads", "1", "--rounds", "2", "--iters", "1", "--warmup", "1",
            "--api", "both", "--torch", "da2-tiny", "--no-memory", "--no-probe", "--json", str(out)]
    assert main(args) == 0
    result = json.loads(out.read_text())
    labels = [r["label"] for r in result["results"]]
    assert labels == ["a.tflite [compiled]", "a.tflite [interpreter]", "b.tflite [compiled]",
                      "b.tflite [interpreter]", "torch eager (da2-tiny, upstream)"]
    assert result["results"][0]["ratio"]["median"] == 1.0
    assert result["machine"]["cores"] >= 1 and "ai-edge-litert" in result["versions"]
    assert result["probe"] == {"skipped": "--no-probe"}
    assert all(r["gmac"] > 0 and r["pct_of_peak"] is None for r in result["results"])
    assert "latency, 1 threads" in capsys.readouterr().out


def test_cli_bad_input_exits_2(tmp_path, capsys):
    assert main(["bench"]) == 2
    (tmp_path / "model.txt").write_text("x")
    assert main(["bench", str(tmp_path / "model.txt")]) == 2
    assert "unsupported model file" in capsys.readouterr().err
    assert main(["bench", str(tmp_path / "missing.tflite")]) == 2
    assert main(["bench", "--torch", "da2-tiny"]) == 2


BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
MEMO_SITE = str(Path(__file__).resolve().parents[1] / "memo_site")  # Python children that put it first share the conversion memo


def load_device_run():
    import importlib.util

    spec = importlib.util.spec_from_file_location("device_run", BENCHMARKS / "device_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_device_run_script_small_mode(tmp_path):
    """benchmarks/device_run.sh --small with this venv: tiny files, CPU at 1 and 2 threads with the probe; the
    GPU part runs only where nvidia-smi finds a GPU."""
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(p for p in (MEMO_SITE, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run(["bash", str(BENCHMARKS / "device_run.sh"), "--small", "--no-install"], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert {k: v["status"] for k, v in summary["steps"].items() if k != "gpu"} == {
        "environment": "ok", "files": "ok", "cpu": "ok"}
    assert summary["environment"]["machine"]["isa"] and summary["exit_codes"] == {"export": 0, "plain": 0}
    if not summary["environment"]["gpu_present"]:
        assert summary["steps"]["gpu"]["status"].startswith("skipped")
    assert all(summary["files"][k] for k in ("plain", "fp32", "int8"))
    assert [t["threads"] for t in summary["cpu"]] == [1, 2]
    for t in summary["cpu"]:
        assert [f["label"] for f in t["files"]] == ["plain", "fp32", "int8"]
        for f in t["files"]:
            assert f["gmac"] > 0 and f["pct_of_peak"] == pytest.approx(
                100 * f["gmac_per_s"] / t["probe"]["peak_gmac_per_s"])
        assert set(t["probe"]["int8_gain"]) == {"int8_dynamic", "int8_static"}
    table = (out / "summary.md").read_text()
    assert "| 1 |" in table and "| 2 |" in table and "INT8 gain" in table


@pytest.mark.gpu
def test_device_run_gpu_step_on_swiftshader(tiny_tflite, tmp_path, monkeypatch):
    """The device run's GPU step, here on SwiftShader: each precision runs fully on the LiteRT GPU accelerator in
    its own child, and is compared with the CPU and with the FP16-compute prediction."""
    from helpers import vulkan_or_skip

    for key, value in vulkan_or_skip().env().items():
        monkeypatch.setenv(key, value)
    device_run = load_device_run()
    run = device_run.Run(tmp_path, 600, "small")
    run.summary["fp16_compute"] = {"rel_l2": 1.5e-3}
    rows = device_run.gpu_runs(run, {"fp32": tiny_tflite}, device_run.CONFIGS["small"])
    assert [(r["file"], r["gpu_precision"]) for r in rows] == [("fp32", "fp32"), ("fp32", "fp16")]
    for row in rows:
        assert row["ok"], row.get("error")
        assert row["median_ms"] > 0 and row["rel_l2_vs_cpu_same_file"] == row["rel_l2_vs_cpu_fp32_file"]
    assert rows[0]["rel_l2_vs_cpu_same_file"] < 1e-4 and rows[1]["rel_l2_vs_cpu_same_file"] < 1e-2
    assert rows[1]["predicted_fp16_compute_rel_l2"] == 1.5e-3 and rows[0]["predicted_fp16_compute_rel_l2"] is None
    assert all(r["finite"] for r in rows)
    assert "| fp32 | fp16 |" in device_run.markdown(run.summary)


@pytest.mark.gpu
def test_device_run_fp16_study_on_swiftshader(tmp_path, monkeypatch):
    """The FP16 study's files (FP16-safe, stress weights, both) are exported with their own predictions and each
    runs on the GPU accelerator at FP16 precision beside its prediction."""
    from helpers import vulkan_or_skip

    for key, value in vulkan_or_skip().env().items():
        monkeypatch.setenv(key, value)
    # the export children share the conversion memo (test_cli's stress-weights exports make two of the same files)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (MEMO_SITE, os.environ.get("PYTHONPATH")) if p))
    device_run = load_device_run()
    run = device_run.Run(tmp_path, 600, "small")
    run.summary["files"] = {}
    files = device_run.fp16_study_files(run, device_run.CONFIGS["small"])
    assert set(files) == set(device_run.FP16_STUDY) and all(files.values())
    predictions = run.summary["predictions"]
    assert predictions["stress"]["overflow_ops"] and not predictions["stress_safe"]["overflow_ops"]
    rows = device_run.gpu_runs(run, files, device_run.CONFIGS["small"])
    assert [(r["file"], r["gpu_precision"]) for r in rows] == [(n, "fp16") for n in device_run.FP16_STUDY]
    for row in rows:
        assert row["ok"], row.get("error")
        assert row["predicted_fp16_compute_rel_l2"] == predictions[row["file"]]["rel_l2"]
    assert "| stress_safe | fp16 |" in device_run.markdown(run.summary)
