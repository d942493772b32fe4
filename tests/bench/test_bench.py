"""Benchmarking: interleaved timing of real files, ratios, the export step, peak memory, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
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


def test_a_long_call_makes_fewer_rounds_and_the_records_say_so():
    log: list[str] = []
    x = sample_input((1, 2))
    entries = [Entry("a", Recorder("a", log), x), Entry("long", Recorder("long", log), x, warm_ms=50.0)]
    records = time_interleaved(entries, rounds=3, warmup=1, iters=2, slow_ms=10.0, long_ms=40.0, long_rounds=2)
    assert log == ["a"] + ["a", "long"] * 2 and [(r["rounds"], r["iters"]) for r in records] == [(2, 1), (2, 1)]
    assert all(len(r["round_medians"]) == 2 for r in records)
    log.clear()
    records = time_interleaved(entries, rounds=3, warmup=1, iters=2, slow_ms=10.0, long_ms=60.0, long_rounds=2)
    assert log == ["a"] + ["a", "long"] * 3 and records[1]["rounds"] == 3


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


def load_benchmark(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_device_run_script_refuses_a_folder_without_the_prepared_runtime(tmp_path):
    """The GPU machine reaches no registry: without device_prepare.py's folder the script says so and exits 2."""
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(BENCHMARKS / "device_run.sh"), str(tmp_path / "missing")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "device_prepare.py" in proc.stderr


@pytest.mark.gpu
def test_device_prepare_then_run_on_swiftshader(tmp_path, monkeypatch):
    """device_prepare.py's sets (plain and stress weights, da2-tiny) and device_run.py on them, the GPU on
    SwiftShader: every carried file runs fully on the GPU accelerator beside its prediction, the CPU's forced
    FP16 inference shows the stress weights' overflow, and a file altered on the way is refused."""
    import skimage.data
    from helpers import vulkan_or_skip
    from PIL import Image

    from depthport.core.machine import fp16_arithmetic

    vulkan_or_skip()
    # the export children share the conversion memo (test_cli's stress-weights exports make the same files)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (MEMO_SITE, os.environ.get("PYTHONPATH")) if p))
    prepare, device_run = load_benchmark("device_prepare"), load_benchmark("device_run")
    inp, scratch, out = tmp_path / "in", tmp_path / "scratch", tmp_path / "out"
    (scratch / "images").mkdir(parents=True)
    Image.fromarray(skimage.data.chelsea()).save(scratch / "images" / "chelsea.png")
    (inp / "common").mkdir(parents=True)
    (inp / "common" / "machine.json").write_text(json.dumps({"model": "da2-tiny", "size": "56x70"}))
    entries = {}
    for name in ("plain", "stress"):
        (inp / name).mkdir()
        entries[name] = prepare.export_set(name, "da2-tiny", "56x70", scratch / "images", scratch, inp / name, True,
                                           xnnpack=name == "plain")
    assert entries["stress"]["prediction"]["overflow_ops"] and not entries["plain"]["prediction"]["overflow_ops"]
    assert entries["plain"]["prediction_xnnpack"]["rel_l2"] > 0 and entries["stress"]["prediction_xnnpack"] is None
    assert set(entries["plain"]["files"]) == {"fp32", "fp16"}
    args = ["--in", str(inp), "--out", str(out), "--swiftshader", "--runs", "2", "--threads", "1,2", "--rounds", "2"]
    monkeypatch.setattr(sys, "argv", ["device_run.py", *args])
    temp = tmp_path / "temp"  # where device_run's scratch goes, and must not stay
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    assert device_run.main() == 0
    assert not list(temp.glob("depthport-device-*"))
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["gpu"]
    assert [(r["set"], r["storage"], r["gpu_precision"]) for r in rows] == [
        ("plain", "fp32", "fp16"), ("plain", "fp32", "fp32"), ("plain", "fp16", "fp16"), ("plain", "fp16", "fp32"),
        ("stress", "fp32", "fp16"), ("stress", "fp16", "fp16")]
    for r in rows:
        assert r["ok"] and r["finite"] and r["median_ms"] > 0, r
        assert r["cpu_here_vs_prepared_rel_l2"] == 0.0  # the same CPU, the same file
        # SwiftShader computes FP32 whatever the precision: the FP32 file matches its CPU run
        assert r["vs_same_file_cpu"]["rel_l2"] < 1e-4
    assert rows[0]["predicted_rel_l2"] == entries["plain"]["prediction"]["rel_l2"]
    forced = {r["set"]: r["cpu_xnnpack_force_fp16"] for r in rows if r["storage"] == "fp32"}
    assert forced["plain"]["predicted_xnnpack_rel_l2"] == entries["plain"]["prediction_xnnpack"]["rel_l2"]
    assert forced["plain"]["mode"] == fp16_arithmetic()["mode"]
    assert forced["plain"]["finite"] and forced["plain"]["vs_fp32_file_cpu"]["rel_l2"] < 1e-2
    assert not forced["stress"]["finite"] or (
        forced["stress"]["vs_fp32_file_cpu"]["rel_l2"] > 10 * forced["plain"]["vs_fp32_file_cpu"]["rel_l2"])
    assert [c["threads"] for c in summary["cpu"]] == [1, 2] and all(c["median_ms"] > 0 for c in summary["cpu"])
    assert "| stress | stress_fp16.tflite | fp16 | yes |" in (out / "summary.md").read_text()

    stored = inp / "stress" / entries["stress"]["files"]["fp16"]["stored"]
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    (inp / "plain").rename(tmp_path / "plain-set-done")  # the altered file's set alone: its GPU runs were done above
    ran = []  # a set's files are all checked before any of them runs: its unaltered fp32 file is not run either
    monkeypatch.setattr(device_run, "run_gpu", lambda path, *a, **k: ran.append(path) or {"ok": True})
    assert device_run.main() == 1 and ran == []
    assert not list(temp.glob("depthport-device-*"))
    summary = json.loads((out / "summary.json").read_text())
    assert "SHA-256" in summary["steps"]["set stress"]["status"]
