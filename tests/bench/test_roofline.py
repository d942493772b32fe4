"""Roofline figures: MACs counted from real graphs (.tflite, .onnx, .pte), the GEMM probe, the machine's CPU
features, LiteRT's op profiler, and their place in `depthport bench`."""

from __future__ import annotations

import json
import math
import platform
from pathlib import Path

import pytest
import torch
from torch import nn

from depthport.bench import macs, probe, roofline
from depthport.core import machine
from depthport.bench.profile import mac_op_type, mac_rates, profile_tflite, summarize_events
from depthport.bench.profile_runtimes import profile_file
from depthport.bench.timing import time_interleaved
from depthport.cli import main

HW = (8, 10)
# Hand-computed MACs of SmallNet on a (1, 3, 8, 10) input.
HAND = {
    "CONV_2D": 8 * 10 * 8 * (3 * 3 * 3),           # 8x10 pixels x 8 channels out x 3x3x3 taps
    "DEPTHWISE_CONV_2D": 8 * 10 * 8 * (3 * 3),     # 8x10 pixels x 8 channels x 3x3 taps
    "TRANSPOSE_CONV": (8 * 10 * 8) * (2 * 2 * 4),  # each of 8x10x8 inputs scattered to 2x2 taps x 4 channels
    "FULLY_CONNECTED": (16 * 20) * 4 * 6,          # 320 tokens x 4 in x 6 out
    "BATCH_MATMUL": (6 * 6) * 320,                 # (6 x 320) @ (320 x 6)
}


class SmallNet(nn.Module):
    """One op of each MAC type the counter knows, on activations (no constant operand for the matmul)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fc = nn.Linear(4, 6)

    def forward(self, x):
        x = self.up(self.dw(self.conv(x)))                    # (1, 4, 16, 20)
        t = self.fc(x.permute(0, 2, 3, 1).reshape(320, 4))    # (320, 6)
        return (t.transpose(0, 1) @ t).reshape(1, 1, 6, 6)


@pytest.fixture(scope="module")
def small_net():
    torch.manual_seed(0)
    return SmallNet().eval()


@pytest.fixture(scope="module")
def small_tflite(small_net, tmp_path_factory):
    from depthport.export.litert import export_tflite

    return export_tflite(small_net, HW, tmp_path_factory.mktemp("roofline") / "small.tflite")


@pytest.fixture(scope="module")
def small_onnx(small_net, tmp_path_factory):
    from depthport.export.onnx import export_onnx

    return export_onnx(small_net, HW, tmp_path_factory.mktemp("roofline-onnx") / "small.onnx")


@pytest.fixture(scope="module")
def small_pte(small_net, tmp_path_factory):
    from depthport.export.executorch import lower_xnnpack, write_pte

    manager, _ = lower_xnnpack(small_net, torch.zeros(1, 3, *HW))
    return write_pte(manager, tmp_path_factory.mktemp("roofline-pte") / "small.pte")


def test_tflite_mac_count_equals_the_hand_computed_number(small_tflite):
    counted = macs.count_macs(small_tflite)
    assert counted["counted"] and counted["by_op"] == HAND
    assert counted["total"] == sum(HAND.values()) and counted["by_precision"] == {"fp32": sum(HAND.values())}
    assert counted["uncounted"] == []


def test_onnx_and_torch_counts_equal_the_hand_computed_number(small_net, small_onnx):
    onnx_count = macs.count_macs(small_onnx)
    assert onnx_count["counted"] and onnx_count["total"] == sum(HAND.values())
    assert onnx_count["by_op"]["Conv"] == HAND["CONV_2D"] + HAND["DEPTHWISE_CONV_2D"]
    assert onnx_count["by_op"]["ConvTranspose"] == HAND["TRANSPOSE_CONV"]
    assert roofline.count_torch(small_net, (1, 3, *HW))["total"] == sum(HAND.values())


def test_pte_count_equals_the_hand_computed_number(small_pte):
    counted = macs.count_macs(small_pte)
    assert counted["counted"], counted.get("reason")
    assert counted["total"] == sum(HAND.values())
    # XNNPACK leaves the activation x activation matmul to the portable aten::mm kernel, counted from its sizes
    assert counted["by_op"]["aten::mm"] == HAND["BATCH_MATMUL"]
    assert {k: v for k, v in counted["by_op"].items() if k != "aten::mm"} == {
        k: v for k, v in HAND.items() if k != "BATCH_MATMUL"}


def test_real_architecture_graph_count_equals_torch_flop_counter(tiny_tflite, tiny_built):
    """The tiny DA-V2 .tflite against an independent count: torch's FlopCounterMode on the same eager model."""
    counted = macs.count_macs(tiny_tflite)
    by_torch = roofline.count_torch(tiny_built.model, (1, 3, *tiny_built.input_hw))
    assert counted["total"] == by_torch["total"] > 0
    assert set(counted["by_op"]) == {"CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL"}


def test_unreadable_files_are_reported_not_counted(tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a model")
    for path in (bad, tmp_path / "x.mlpackage"):
        result = macs.count_macs(path)
        assert result["counted"] is False and result["total"] is None and result["reason"]
    figures = roofline.figures(macs.count_macs(bad), 10.0, {"peak_gmac_per_s": 50.0})
    assert figures["gmac"] is None and figures["pct_of_peak"] is None


def test_precision_classes():
    assert macs.precision_class("FLOAT32", "FLOAT32") == "fp32"
    assert macs.precision_class("FLOAT32", "INT8") == "int8_dynamic"
    assert macs.precision_class("INT8", "INT8") == "int8"
    assert macs.precision_class("FLOAT16", "FLOAT16") == "float16xfloat16"


X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t: 0
flags\t\t: fpu sse avx2 fma avx512f avx512_vnni avx512_fp16 amx_tile amx_int8 amx_bf16

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t: 1
flags\t\t: fpu sse avx2 fma avx512f avx512_vnni avx512_fp16 amx_tile amx_int8 amx_bf16
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU part\t: 0xd0c
"""


def test_cpuinfo_parsing_of_x86_and_arm_formats():
    x86 = machine.parse_cpuinfo(X86_CPUINFO, "x86_64")
    assert x86["cpu"] == "Intel(R) Xeon(R) Platinum 8480+" and x86["physical_cores"] == 2
    assert x86["isa"] == {"avx2": True, "fma": True, "avx512f": True, "avx512_fp16": True, "avx512_vnni": True,
                          "avx_vnni": False, "amx": True, "amx_int8": True, "amx_bf16": True, "amx_fp16": False}
    arm = machine.parse_cpuinfo(ARM_CPUINFO, "aarch64")
    assert arm["cpu"] == "ARM implementer 0x41 part 0xd0c"
    assert arm["isa"] == {"neon": True, "dotprod": True, "i8mm": False, "fp16_arith": True, "bf16": False,
                          "sve": False}


ZEN3_CPUINFO = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse avx2 fma f16c\n"
ZEN5_CPUINFO = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma f16c avx512f avx512_bf16 avx512_vnni\n"


@pytest.mark.parametrize(("text", "arch", "arithmetic"), [
    (X86_CPUINFO, "x86_64", True), (ARM_CPUINFO, "aarch64", True), (ZEN3_CPUINFO, "x86_64", False),
    (ZEN5_CPUINFO, "x86_64", False)], ids=["sapphire-rapids", "armv8.2", "zen3", "avx512-without-fp16"])
def test_fp16_arithmetic_is_read_from_the_isa(text, arch, arithmetic):
    parsed = machine.parse_cpuinfo(text, arch)
    found = machine.fp16_arithmetic({"cpu": parsed["cpu"], "isa": parsed["isa"]})
    assert found["arithmetic"] is arithmetic
    assert found["mode"] == ("fp16 arithmetic" if arithmetic else "fp16 storage only")
    assert parsed["cpu"] in found["reason"]
    assert machine.fp16_arithmetic({"cpu": "?", "isa": {}})["arithmetic"] is None


def test_this_machine_says_which_fp16_it_computes():
    found = machine.fp16_arithmetic()
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if platform.machine() == "x86_64" and flags:
        assert found["arithmetic"] is ("avx512_fp16" in flags.split())


def test_machine_info_reads_this_machine():
    info = machine.machine_info(threads=3)
    assert info["cpu"] and info["cores"] >= 1 and info["threads"] == 3
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if platform.machine() == "x86_64" and text:
        flags = set(next(ln for ln in text.splitlines() if ln.startswith("flags")).split(":", 1)[1].split())
        assert info["isa"]["avx2"] == ("avx2" in flags) and info["isa"]["fma"] == ("fma" in flags)
        assert set(info["isa"]) >= {"avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx"}
    line = machine.describe(info)
    assert info["cpu"] in line and "3 threads" in line


TEST_PROBE = probe.ProbeSpec(layers=2, tokens=64, dim=48, hidden=96)


def test_probe_chains_count_exactly_and_time_interleaved():
    files = probe.probe_files(TEST_PROBE)
    assert set(files) == set(probe.KINDS)
    classes = {"fp32": "fp32", "int8_dynamic": "int8_dynamic", "int8_static": "int8"}
    for kind, path in files.items():
        counted = macs.count_macs(path)
        assert counted["total"] == TEST_PROBE.macs == 2 * 64 * 48 * 96
        assert counted["by_op"] == {"FULLY_CONNECTED": TEST_PROBE.macs}
        assert counted["by_precision"] == {classes[kind]: TEST_PROBE.macs}
    records = time_interleaved(probe.probe_entries(TEST_PROBE, threads=1), rounds=2, warmup=1, iters=1)
    summary = probe.summarize(TEST_PROBE, records, threads=1)
    fp32 = summary["kinds"]["fp32"]
    assert summary["peak_gmac_per_s"] == fp32["gmac_per_s"] == pytest.approx(TEST_PROBE.macs / 1e6 / fp32["median_ms"])
    for kind in ("int8_dynamic", "int8_static"):
        gain = summary["int8_gain"][kind]
        assert gain["median"] == pytest.approx(fp32["median_ms"] / summary["kinds"][kind]["median_ms"])
    assert summary["gmac_counted_from_graph"] == summary["gmac"]


def test_roofline_figures_follow_their_definitions():
    counted = {"counted": True, "total": 3_000_000_000, "gmac": 3.0, "by_op": {},
               "by_precision": {"fp32": 1_000_000_000, "int8_dynamic": 2_000_000_000}}
    prb = {"peak_gmac_per_s": 50.0, "kinds": {"fp32": {"gmac_per_s": 50.0}, "int8_dynamic": {"gmac_per_s": 80.0}}}
    fig = roofline.figures(counted, 100.0, prb)  # 3 GMAC in 100 ms
    assert fig["gmac_per_s"] == pytest.approx(30.0) and fig["pct_of_peak"] == pytest.approx(60.0)
    # at peak: 1 GMAC / 50 GMAC/s + 2 GMAC / 80 GMAC/s = 20 ms + 25 ms = 45 ms of the 100 ms
    assert fig["pct_of_mixed_peak"] == pytest.approx(45.0)
    assert "pct_of_mixed_peak" not in roofline.figures(counted, 100.0, {"peak_gmac_per_s": 50.0, "kinds": {
        "fp32": {"gmac_per_s": 50.0}}})
    assert roofline.figures(counted, 100.0, None)["pct_of_peak"] is None


def test_torch_count_includes_cpu_attention():
    """scaled_dot_product_attention runs as _scaled_dot_product_flash_attention_for_cpu here: QK^T and AV."""
    class Attention(nn.Module):
        def forward(self, x):
            q = k = v = x.reshape(1, 2, 10, 8)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    assert roofline.count_torch(Attention(), (1, 160))["total"] == 2 * (1 * 2 * 10 * 10 * 8)


def test_litert_profiler_reports_every_mac_op_of_the_graph(tiny_tflite):
    prof = profile_tflite(tiny_tflite, threads=1, runs=3, warmup=1)
    assert "error" not in prof, prof.get("error")
    assert prof["by_type"] and 0 < len(prof["top"]) <= 10
    assert 0 < prof["ops_ms"] <= prof["invoke_ms"]
    assert math.isclose(sum(t["pct"] for t in prof["by_type"]), 100.0, rel_tol=1e-9)
    rows = {r["op"]: r for r in mac_rates(prof, macs.count_macs(tiny_tflite), peak_gmac_per_s=10.0)}
    total = rows.pop("all MAC ops")
    assert total["tflite_ops"] == total["runtime_ops"] == sum(macs.count_macs(tiny_tflite)["op_count"].values())
    assert total["gmac_per_s"] > 0 and total["pct_of_peak"] == pytest.approx(10 * total["gmac_per_s"])
    assert set(rows) == {"CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL"}


@pytest.mark.parametrize("kind", ["pte", "onnx"])
def test_executorch_and_onnxruntime_profilers_time_every_mac_op_of_the_file(kind, small_pte, small_onnx):
    path = small_pte if kind == "pte" else small_onnx
    prof = profile_file(path, threads=1, runs=2, warmup=1)
    assert "error" not in prof, prof.get("error")
    assert prof["by_type"] and 0 < len(prof["top"]) <= 10 and prof["file"] == path.name
    assert 0 < prof["ops_ms"] <= prof["invoke_ms"]
    assert math.isclose(sum(t["pct"] for t in prof["by_type"]), 100.0, rel_tol=1e-9)
    counted = macs.count_macs(path)
    rows = {r["op"]: r for r in mac_rates(prof, counted, peak_gmac_per_s=10.0)}
    total = rows.pop("all MAC ops")
    assert total["tflite_ops"] == total["runtime_ops"] == sum(counted["op_count"].values())
    assert total["gmac"] == pytest.approx(sum(HAND.values()) / 1e9) and total["gmac_per_s"] > 0
    # every MAC op type of the file ran under the profiler and has a time (which may round to 0 ms on a fast CPU:
    # the profilers' resolution is a microsecond, a tiny op can take less)
    assert all(r["runtime_ops"] > 0 and r["ms"] is not None and r["ms"] >= 0 for r in rows.values()), rows
    wheres = {o["where"] for o in prof["top"]}
    # the .pte's activation x activation matmul runs on the portable aten::mm kernel, outside XNNPACK
    assert wheres == ({"XNNPACK", "portable"} if kind == "pte" else {"onnxruntime"})


def test_profiler_event_names_map_to_the_op_types_counted_in_the_file():
    assert mac_op_type("Fully Connected (NC, F32) GEMM") == "FULLY_CONNECTED"
    assert mac_op_type("Convolution (NHWC, F32) IGEMM") == "CONV_2D"
    assert mac_op_type("native_call_mm.out") == "aten::mm" and mac_op_type("native_call_add.out") is None
    assert mac_op_type("FusedMatMul") == "MatMul" and mac_op_type("Gemm") == "Gemm"
    assert mac_op_type("BATCH_MATMUL") == "BATCH_MATMUL" and mac_op_type("Softmax (NC, F32)") is None


def test_profile_summary_does_not_count_a_delegate_kernel_twice():
    events = [{"tag": "Invoke", "type": 1, "us": 100, "node": 0},
              {"tag": "TfLiteXNNPackDelegate", "type": 2, "us": 90, "node": 0},
              {"tag": "Fully Connected (NC, F32) GEMM", "type": 8, "us": 60, "node": 1},
              {"tag": "Add (ND)", "type": 8, "us": 20, "node": 2},
              {"tag": "GATHER_ND", "type": 2, "us": 10, "node": 5}]
    summary = summarize_events(events, runs=1)
    assert summary["ops_ms"] == pytest.approx(0.090) and summary["invoke_ms"] == pytest.approx(0.1)
    assert [t["type"] for t in summary["by_type"]] == ["Fully Connected (NC, F32) GEMM", "Add (ND)", "GATHER_ND"]
    assert summary["top"][2] == {"where": "TFLite", "node": 5, "type": "GATHER_ND", "ms": 0.01,
                                 "pct": pytest.approx(100 / 9)}


def test_cli_shows_gmac_peak_machine_and_profile(tiny_tflite, tmp_path, capsys):
    out = tmp_path / "bench.json"
    args = ["bench", str(tiny_tflite), "--threads", "1", "--rounds", "2", "--iters", "1", "--warmup", "1",
            "--probe-size", "small", "--no-memory", "--profile", str(tiny_tflite), "--profile-runs", "2",
            "--json", str(out)]
    assert main(args) == 0
    result = json.loads(out.read_text())
    rec = result["results"][0]
    assert rec["gmac"] == pytest.approx(macs.count_macs(tiny_tflite)["gmac"])
    assert rec["gmac_per_s"] == pytest.approx(rec["gmac"] * 1e3 / rec["median"])
    assert rec["pct_of_peak"] == pytest.approx(100 * rec["gmac_per_s"] / result["probe"]["peak_gmac_per_s"])
    assert set(result["probe"]["int8_gain"]) == {"int8_dynamic", "int8_static"}
    assert result["machine"]["threads"] == 1 and "isa" in result["machine"]
    assert rec["cpu"] == machine.describe(result["machine"])
    assert result["profile"]["by_type"] and "error" not in result["profile"]
    text = capsys.readouterr().out
    assert "GMAC/s" in text and "% of peak" in text and f"machine: {result['machine']['cpu']}" in text
    assert "INT8 possible gain" in text and "time per op type" in text and "top 10 ops" in text


def test_cli_profile_alone_and_bad_profile_input(tiny_tflite, tmp_path, capsys):
    assert main(["bench", "--profile", str(tiny_tflite), "--threads", "1", "--profile-runs", "1"]) == 0
    assert "time per op type" in capsys.readouterr().out
    assert main(["bench", "--profile", str(tmp_path / "missing.tflite")]) == 2
    assert main(["bench", "--profile", str(tmp_path / "missing.onnx")]) == 2
    (tmp_path / "model.txt").write_text("not a model")
    capsys.readouterr()
    assert main(["bench", "--profile", str(tmp_path / "model.txt")]) == 2
    assert "--profile takes a .tflite, .pte, .onnx file" in capsys.readouterr().err


def test_cli_profiles_a_pte_with_etdump(small_pte, capsys):
    assert main(["bench", "--profile", str(small_pte), "--threads", "1", "--profile-runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "time per op type" in out and "ETDump" in out and "native_call_mm" in out
