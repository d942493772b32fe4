"""LiteRT FP16 / INT8 variants: interface kept, smaller, close to FP32, GPU verdicts, FP16-compute prediction."""

import subprocess
import sys

import numpy as np
import pytest

from depthport.core.tflite_graph import read_graph
from depthport.check.stage import check_litert
from depthport.export.context import StageOptions
from depthport.export.targets import ExportContext, load_all
from depthport.runtimes import load_runner

from helpers import TINY_HW, gpu_ok, gpu_reason, image_batch, rel_l2, vulkan_or_skip

VARIANTS = ("litert-fp16", "litert-int8", "litert-int8-weight")


@pytest.fixture(scope="module")
def exported(tiny_built, tmp_path_factory):
    """The four LiteRT targets of one tiny export: {target: entry}, plus the context."""
    targets = load_all()
    ctx = ExportContext(tiny_built, tmp_path_factory.mktemp("variants"), "tiny")
    entries = {name: targets[name](ctx) for name in ("litert-fp32", *VARIANTS)}
    for entry in entries.values():
        check_litert(ctx, entry, ctx.out_dir / entry["file"])
    return ctx, entries


@pytest.fixture(scope="module")
def outputs(exported):
    ctx, entries = exported
    x = image_batch(TINY_HW, seed=7).numpy()
    return {name: load_runner(ctx.out_dir / e["file"]).run(x) for name, e in entries.items()}


def test_file_names_and_precisions(exported):
    _, entries = exported
    assert {n: (e["file"], e["precision"]) for n, e in entries.items()} == {
        "litert-fp32": ("tiny_fp32.tflite", "fp32"), "litert-fp16": ("tiny_fp16.tflite", "fp16"),
        "litert-int8": ("tiny_int8.tflite", "int8"), "litert-int8-weight": ("tiny_int8_weight.tflite", "int8")}
    assert all(entries[n]["recipe"] for n in VARIANTS)


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_keeps_signature_and_fp32_io(exported, name):
    from ai_edge_litert.interpreter import Interpreter

    ctx, entries = exported
    interpreter = Interpreter(model_path=str(ctx.out_dir / entries[name]["file"]))
    assert interpreter.get_signature_list() == {"serving_default": {"inputs": ["args_0"], "outputs": ["output_0"]}}
    runner = interpreter.get_signature_runner("serving_default")
    (inp,), (out,) = runner.get_input_details().values(), runner.get_output_details().values()
    assert (list(inp["shape"]), inp["dtype"]) == ([1, 3, *TINY_HW], np.float32)
    assert (list(out["shape"]), out["dtype"]) == ([1, *TINY_HW], np.float32)


def test_sizes(exported):
    _, e = exported
    fp32 = e["litert-fp32"]["bytes"]
    # The tiny model's biases and norm constants (kept FP32) weigh relatively more than at full size.
    assert e["litert-fp16"]["bytes"] < 0.62 * fp32
    # The INT8 file keeps the DPT fusion blocks float (FP16 weights): a large share of the tiny model.
    assert e["litert-int8"]["bytes"] < 0.55 * fp32
    assert e["litert-int8-weight"]["bytes"] < 0.45 * fp32


def test_fp16_file_keeps_no_large_float32_constant(exported):
    ctx, entries = exported
    graph = read_graph(ctx.out_dir / entries["litert-fp16"]["file"])
    float32_constants = [t for op in graph.ops for t in op.present_inputs if t.is_constant and t.dtype == "FLOAT32"]
    assert max(np.prod(t.shape) for t in float32_constants) < 1024
    dequantized = [op.inputs[0] for op in graph.ops if op.name == "DEQUANTIZE"]
    assert dequantized and all(t.dtype == "FLOAT16" for t in dequantized)


def test_int8_keeps_head_fusion_float_and_encoder_int8(exported):
    ctx, entries = exported
    graph = read_graph(ctx.out_dir / entries["litert-int8"]["file"])

    def weight_source(op):
        producer = graph.producer(op.inputs[1])
        return producer.inputs[0].dtype if producer is not None and producer.name == "DEQUANTIZE" else op.inputs[1].dtype

    fusion = [op for op in graph.ops if op.name == "CONV_2D" and "FusionBlock" in op.outputs[0].name]
    blocks = [op for op in graph.ops if op.name == "FULLY_CONNECTED" and op.inputs[1].shape[0] > 1
              and ("Attention_attn" in op.outputs[0].name or "Mlp_mlp" in op.outputs[0].name)]
    # Float16 storage applies to constants of >= 1024 values; the tiny 1x1 convs stay float32.
    assert fusion and "FLOAT16" in {weight_source(op) for op in fusion} <= {"FLOAT16", "FLOAT32"}
    assert blocks and {weight_source(op) for op in blocks} == {"INT8"}
    norms = [op for op in graph.ops if op.name == "FULLY_CONNECTED" and op.inputs[1].shape[0] == 1]
    assert norms and {weight_source(op) for op in norms} == {"FLOAT32"}


def test_cast_constants_fp16_covers_batch_matmul_weights(tmp_path):
    """ai-edge-quantizer's float_casting skips BATCH_MATMUL; cast_constants_fp16 stores its weights as float16."""
    import torch

    from depthport.export.litert import export_tflite
    from depthport.fp16 import cast_constants_fp16

    class HeadMajor(torch.nn.Module):
        """Tokens (N, 64) times per-head weights (2, 64, 48): a BATCH_MATMUL with a constant right-hand side."""

        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Conv2d(3, 64, 1)
            self.w = torch.nn.Parameter(torch.randn(2, 64, 48))

        def forward(self, x):
            return (self.embed(x).reshape(64, -1).transpose(0, 1) @ self.w)[None]

    torch.manual_seed(0)
    fp32 = export_tflite(HeadMajor(), (4, 8), tmp_path / "bmm.tflite")
    data, cast = cast_constants_fp16(fp32.read_bytes())
    fp16 = tmp_path / "bmm_fp16.tflite"
    fp16.write_bytes(data)
    graph = read_graph(fp16)
    (bmm,) = [op for op in graph.ops if op.name == "BATCH_MATMUL"]
    producer = graph.producer(bmm.inputs[1])
    assert cast == 1 and producer.name == "DEQUANTIZE" and producer.inputs[0].dtype == "FLOAT16"
    assert fp16.stat().st_size < 0.6 * fp32.stat().st_size
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 8)).astype(np.float32)
    assert rel_l2(load_runner(fp16).run(x), load_runner(fp32).run(x)) < 1e-3


@pytest.mark.parametrize(("name", "bound"), [("litert-fp16", 1e-3), ("litert-int8", 0.05),
                                             ("litert-int8-weight", 0.02)])
def test_parity_to_fp32(outputs, name, bound):
    assert rel_l2(outputs[name], outputs["litert-fp32"]) < bound


def test_gpu_verdicts(exported):
    _, e = exported
    rules = {name: {v["rule"] for v in entry["gpu_check"]["violations"] if v["severity"] == "error"}
             for name, entry in e.items()}
    assert gpu_ok(e["litert-fp32"]) is (not rules["litert-fp32"])
    # Dynamic INT8 adds no GPU problem of its own: the encoder's FCs are rank-2, so the rank-3 FC + ADD rule is silent.
    assert rules["litert-int8"] == rules["litert-fp32"] and gpu_ok(e["litert-int8"]) is gpu_ok(e["litert-fp32"])
    assert gpu_ok(e["litert-int8-weight"]) is False
    assert "int8-weight-only-fc" in rules["litert-int8-weight"]
    assert "int8-weight-only-fc" in gpu_reason(e["litert-int8-weight"])


def test_fp16_compute_prediction_in_entries(exported):
    _, e = exported
    prediction = e["litert-fp32"]["fp16_compute"]
    assert prediction is e["litert-fp16"]["fp16_compute"]  # computed once per export
    assert prediction["needs_enforce_f32"] is False and prediction["overflow_layers"] == []
    assert 0 < prediction["rel_l2"] < 1e-2


def test_variant_without_fp32_target_uses_a_temporary_fp32(tiny_built, tmp_path):
    ctx = ExportContext(tiny_built, tmp_path, "solo", options=StageOptions(fp16_sim=False))
    entry = load_all()["litert-int8"](ctx)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["solo_int8.tflite"]
    assert "fp16_compute" not in entry and "litert-fp32" not in ctx.files


def test_target_files_outside_the_pipeline_reuse_write_and_check(tiny_built, tiny_tflite, tmp_path):
    """``export.files.TargetFiles`` (what the benchmarks use): a reused FP32 .tflite is the source of a LiteRT
    variant, written under the model's stem with the entry the export stage gives it, and ``check.files`` adds
    the check stage's GPU verdict; an unknown target is refused by name."""
    from depthport.check.files import check_tflite_file
    from depthport.export.files import TargetFiles

    files = TargetFiles(tiny_built, tmp_path, threads=1)
    files.reuse("litert-fp32", tiny_tflite)
    entry = files.write("litert-int8")
    assert entry["file"] == f"{files.stem}_int8.tflite" and (tmp_path / entry["file"]).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [entry["file"]]  # made from the reused FP32 file
    assert files.files["litert-int8"] == tmp_path / entry["file"] and "fp16_compute" not in entry
    extra = files.entry(tmp_path / entry["file"], "int8-again", precision="int8")
    assert extra["target"] == "int8-again" and extra["op_count"] == entry["op_count"] > 0
    checked = check_tflite_file(files, entry)
    assert checked is entry and entry["checks"]["gpu_static"]["state"] in ("pass", "fail") and "gpu_check" in entry
    with pytest.raises(KeyError, match="unknown target 'litert-fp64'"):
        files.write("litert-fp64")


GPU_RUN = """
import sys, numpy as np
from depthport.runtimes.litert_gpu import LiteRTGpuRunner
x = np.random.default_rng(0).standard_normal((1, 3, 56, 70)).astype(np.float32)
gpu = LiteRTGpuRunner(sys.argv[1], accelerator="gpu", gpu_precision="fp32")
cpu = LiteRTGpuRunner(sys.argv[1], accelerator="cpu")
a, b = gpu.run(x), cpu.run(x)
print(gpu.runtime, float(np.linalg.norm(a - b) / np.linalg.norm(b)))
"""


@pytest.mark.gpu
def test_gpu_runner_runs_fp16_weights_with_fp32_compute(tmp_path):
    """FP16 weights (DEQUANTIZE -> FC/CONV) compile GPU-only and match the CPU (toy graph, SwiftShader)."""
    import torch

    from depthport.export.litert import export_tflite
    from depthport.export.litert_variants import make_fp16

    env = vulkan_or_skip().env()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 14, 14), torch.nn.ReLU(), torch.nn.Conv2d(32, 8, 1))
    fp32 = export_tflite(model, TINY_HW, tmp_path / "toy_fp32.tflite")
    fp16 = tmp_path / "toy_fp16.tflite"
    fp16.write_bytes(make_fp16(fp32, {}))
    run = subprocess.run([sys.executable, "-c", GPU_RUN, str(fp16)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    runtime, rel = run.stdout.strip().splitlines()[-1].split()  # the accelerator logs to stdout too
    assert runtime == "litert-gpu-fp32" and float(rel) < 1e-5


@pytest.mark.gpu
def test_runtime_gpu_check_runs_dynamic_int8_and_rejects_weight_only(exported, tmp_path):
    vulkan_or_skip()
    src_ctx, entries = exported
    ctx = ExportContext(src_ctx.built, tmp_path, "gpu", options=StageOptions(run_gpu=True, fp16_sim=False),
                        fp32_source=src_ctx.out_dir / entries["litert-fp32"]["file"])
    targets = load_all()
    int8, weight_only = targets["litert-int8"](ctx), targets["litert-int8-weight"](ctx)
    for entry in (int8, weight_only):
        check_litert(ctx, entry, ctx.out_dir / entry["file"])
    assert int8["gpu_runtime"]["fully_delegated"] is True and int8["gpu_runtime"]["numeric_ok"] is True
    assert gpu_ok(int8) is True
    assert weight_only["gpu_runtime"]["fully_delegated"] is False and gpu_ok(weight_only) is False
    assert gpu_reason(weight_only).startswith("GPU runtime: GPU-only compile failed")
