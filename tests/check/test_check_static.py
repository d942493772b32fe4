"""Static GPU-delegation check: real .tflite graphs from tiny PyTorch modules, one per offending construct."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from depthport.check import RULES, check_static, check_tflite
from depthport.core.tflite_graph import TfliteReadError, graph_summary, read_graph
from depthport.cli.check import add_parser, run
from depthport.check.rules import PIXEL_8A
from depthport.check.static import Violation
from depthport.core.tflite_graph import Graph, OpInfo, TensorInfo

IMAGE = (1, 3, 8, 8)
TOKENS = (1, 5, 8)


class ConvBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)) * 2 + 1


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        a = torch.softmax(self.q(x) @ self.k(x).transpose(-1, -2), -1)
        return (a @ x).mean(-1, keepdim=True) + x


class LinearAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) + x


class WithConstant(torch.nn.Module):
    """Applies `fn(x, constant)` with a fixed random buffer."""

    def __init__(self, fn, shape):
        super().__init__()
        self.fn = fn
        self.register_buffer("c", torch.randn(shape))

    def forward(self, x):
        return self.fn(x, self.c)


class Lambda(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


GRAPHS = {
    "conv": (ConvBlock, IMAGE),
    "attention": (Attention, TOKENS),
    "bilinear": (lambda: Lambda(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear")), IMAGE),
    "bilinear_align_corners": (
        lambda: Lambda(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)), IMAGE),
    "conv_transpose": (lambda: torch.nn.ConvTranspose2d(3, 4, 2, stride=2), IMAGE),
    "index": (lambda: Lambda(lambda x: x[:, :, :, torch.tensor([0, 2, 4])]), IMAGE),
    "expand": (lambda: Lambda(lambda x: x.expand(2, 3, 8, 8) * 2), IMAGE),
    "bicubic_constant": (lambda: WithConstant(
        lambda x, c: x + F.interpolate(c, size=(8, 8), mode="bicubic"), (1, 3, 4, 4)), IMAGE),
    "reshape_5d": (lambda: Lambda(lambda x: (x.reshape(1, 3, 2, 4, 8) * 2).reshape(IMAGE)), IMAGE),
    "where_scalar": (lambda: Lambda(lambda x: torch.where(x > 0, x, 0.5)), IMAGE),
    "where_broadcast": (lambda: Lambda(lambda x: torch.where(x > 0, x, x.mean(-1, keepdim=True))), IMAGE),
    "cast": (lambda: Lambda(lambda x: (x > 0).float() * x), IMAGE),
    "softmax_constant": (lambda: WithConstant(lambda x, c: x + torch.softmax(c, -1), IMAGE), IMAGE),
    "matmul_constant_lhs": (lambda: WithConstant(lambda x, c: torch.matmul(c, x[0]), (3, 8, 8)), IMAGE),
    "linear_add": (LinearAdd, TOKENS),
}
QUANTIZED = {"int8_dynamic_fc": "dynamic_wi8_afp32", "int8_weight_only_fc": "weight_only_wi8_afp32"}


def export(module: torch.nn.Module, shape: tuple[int, ...], path: Path) -> Path:
    """Convert `module` with litert_torch at input `shape` and write `path` (once per session: the memo)."""
    from conversion_memo import convert_toy

    torch.manual_seed(0)
    return convert_toy(module, torch.randn(*shape), path)


def quantize(src: Path, recipe_name: str, path: Path) -> Path:
    """Quantize `src` with an ai_edge_quantizer recipe."""
    from ai_edge_quantizer import quantizer, recipe

    q = quantizer.Quantizer(str(src))
    q.load_quantization_recipe(getattr(recipe, recipe_name)())
    q.quantize().export_model(str(path), overwrite=True)
    return path


def lazy_graphs(folder: Path):
    """name -> .tflite of GRAPHS / QUANTIZED in ``folder``, each converted on first use."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            if name in QUANTIZED:
                cache[name] = quantize(get("linear_add"), QUANTIZED[name], folder / f"{name}.tflite")
            else:
                torch.manual_seed(0)
                factory, shape = GRAPHS[name]
                cache[name] = export(factory(), shape, folder / f"{name}.tflite")
        return cache[name]

    return get


@pytest.fixture(scope="module")
def tflite(tmp_path_factory):
    """Lazily converted graphs by name, each converted once per module."""
    return lazy_graphs(tmp_path_factory.mktemp("graphs"))


def find(violations: list[Violation], op: str, rule: str) -> Violation:
    matches = [v for v in violations if v.op == op and v.rule == rule]
    assert matches, f"no {rule} on {op}; got {[(v.op, v.rule) for v in violations]}"
    return matches[0]


def cli(*argv: str) -> int:
    """Run `depthport check ARGV` through add_parser/run as the main CLI wires them."""
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    return run(parser.parse_args(["check", *argv]))


@pytest.mark.parametrize(("graph", "op", "rule", "severity"), [
    ("index", "GATHER_ND", "unsupported-op", "error"),
    ("expand", "BROADCAST_TO", "unsupported-op", "error"),
    ("bicubic_constant", "GATHER_ND", "unsupported-op", "error"),
    ("bicubic_constant", "BROADCAST_TO", "unsupported-op", "error"),
    ("conv_transpose", "TRANSPOSE_CONV", "transpose-conv", "error"),
    ("bilinear_align_corners", "RESIZE_BILINEAR", "resize-align-corners", "error"),
    ("reshape_5d", "MUL", "rank", "error"),
    ("reshape_5d", "RESHAPE", "rank-5d-webgpu", "warning"),
    ("where_broadcast", "SELECT_V2", "select-shapes", "error"),
    ("where_scalar", "SELECT_V2", "bool-tensor", "warning"),
    ("cast", "CAST", "cast", "warning"),
    ("softmax_constant", "SOFTMAX", "constant-input", "error"),
    ("matmul_constant_lhs", "BATCH_MATMUL", "constant-input", "error"),
    ("int8_dynamic_fc", "FULLY_CONNECTED", "int8-fc-rank3-add", "error"),
    ("int8_weight_only_fc", "FULLY_CONNECTED", "int8-weight-only-fc", "error"),
])
def test_offending_construct_is_found(tflite, graph, op, rule, severity):
    violation = find(check_static(tflite(graph)), op, rule)
    assert violation.severity == severity
    assert violation.source == next(r.source for r in RULES if r.id == rule)
    assert violation.detail


def test_device_bans_cite_the_device(tflite):
    violations = check_static(tflite("conv_transpose")) + check_static(tflite("bilinear_align_corners"))
    bans = [v for v in violations if v.rule in ("transpose-conv", "resize-align-corners")]
    assert len(bans) == 2 and all(v.source == PIXEL_8A for v in bans)


@pytest.mark.parametrize("graph", ["conv", "attention", "bilinear"])
def test_clean_graphs_pass(tflite, graph, capsys):
    result = check_tflite(tflite(graph))
    assert result.gpu_clean is True
    assert [v for v in result.violations if v.severity == "error"] == []
    capsys.readouterr()
    assert cli(str(tflite(graph))) == 0
    # the runtime check not asked for: said once ('no verdict - runtime check not run (use --run-gpu) -> not
    # measured: runtime check not run (use --run-gpu)')
    assert "runtime: not measured: runtime check not run (use --run-gpu)\n" in capsys.readouterr().out


def test_warnings_leave_gpu_clean(tflite):
    result = check_tflite(tflite("where_scalar"))
    assert result.warning_count == 2 and result.error_count == 0
    assert result.gpu_clean is True


def test_weight_only_int8_is_not_double_reported(tflite):
    rules = [v.rule for v in check_static(tflite("int8_weight_only_fc")) if v.op == "FULLY_CONNECTED"]
    assert "int8-weight-only-fc" in rules and "fc-dequantize-input" not in rules


def test_graph_summary(tflite):
    assert graph_summary(tflite("conv")) == {
        "op_count": 5, "op_histogram": {"TRANSPOSE": 2, "CONV_2D": 1, "MUL": 1, "ADD": 1}, "max_tensor_rank": 4}
    assert graph_summary(tflite("reshape_5d"))["max_tensor_rank"] == 5


def test_read_graph_sees_constants_and_options(tflite):
    graph = read_graph(tflite("bilinear_align_corners"))
    resize = next(op for op in graph.ops if op.name == "RESIZE_BILINEAR")
    assert resize.options["alignCorners"] is True
    assert resize.inputs[0].is_constant is False and resize.inputs[1].is_constant is True
    assert resize.outputs[0].shape == (1, 16, 16, 3)


def test_json_output_and_exit_code(tflite, capsys):
    assert cli(str(tflite("expand")), "--json") == 1
    result = json.loads(capsys.readouterr().out)
    assert result["gpu_clean"] is False
    assert {"file", "gpu_clean", "op_count", "op_histogram", "max_tensor_rank", "violations", "runtime"} <= set(result)
    assert {"op_index", "op", "rule", "severity", "source", "detail"} <= set(result["violations"][0])
    assert result["runtime"]["fully_delegated"] is None


def test_table_output(tflite, capsys):
    assert cli(str(tflite("conv_transpose"))) == 1
    out = capsys.readouterr().out
    assert "TRANSPOSE_CONV" in out and "transpose-conv" in out and "NOT GPU clean" in out


def _write_bad_inputs(folder: Path, good: Path) -> dict[str, Path]:
    data = good.read_bytes()
    files = {"empty": b"", "random": os.urandom(4096), "truncated": data[: len(data) // 2],
             "truncated_tail": data[:-16], "text": b"TFL3 is not enough\n"}
    paths = {}
    for name, content in files.items():
        paths[name] = folder / f"{name}.tflite"
        paths[name].write_bytes(content)
    paths["missing"] = folder / "missing.tflite"
    paths["directory"] = folder
    return paths


def test_bad_input_exits_2_with_one_line(tflite, tmp_path):
    for name, path in _write_bad_inputs(tmp_path, tflite("conv")).items():
        with pytest.raises(TfliteReadError):
            read_graph(path)
        proc = subprocess.run([sys.executable, "-m", "depthport.cli", "check", str(path)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, name
        assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, (name, proc.stderr)
        assert "Traceback" not in proc.stderr and str(path) in proc.stderr


def test_an_onnx_or_pte_file_is_told_what_check_takes(tmp_path, capsys):
    """check reads .tflite files: an .onnx or a .pte (an export's other files) is named as what it is, with the
    commands that take it (it was 'not a TFLite model (no TFL3 flatbuffer identifier)')."""
    from depthport.cli import main

    for name, kind in (("m.onnx", "an ONNX model"), ("m.pte", "an ExecuTorch program")):
        (tmp_path / name).write_bytes(b"\x08\x07\x12\x00ET12")
        capsys.readouterr()
        assert main(["check", str(tmp_path / name)]) == 2
        assert capsys.readouterr().err == (f"depthport check: error: {tmp_path / name}: {kind}: check proves that a "
                                           "LiteRT .tflite runs on the mobile GPU; for this file there are depthport "
                                           "verify and depthport bench\n")


def _tensor(index, shape, dtype="FLOAT32", constant=False, signature=None, scales=0):
    return TensorInfo(index, f"t{index}", tuple(shape), signature, dtype, constant, scales)


def _graph(*ops: OpInfo) -> Graph:
    tensors = {t.index: t for op in ops for t in (*op.present_inputs, *op.outputs)}
    return Graph("synthetic", ops, tuple(tensors[i] for i in sorted(tensors)), (), (), 1)


def _op(index, name, inputs, outputs, version=1, **options):
    return OpInfo(index, name, version, tuple(inputs), tuple(outputs), options)


X = _tensor(0, IMAGE)
SYNTHETIC = [
    ("all-constant-inputs", _graph(_op(0, "ADD", [_tensor(1, IMAGE, constant=True), _tensor(2, (1,), constant=True)],
                                       [_tensor(3, IMAGE)]))),
    ("resize-align-corners-half-pixel", _graph(_op(0, "RESIZE_BILINEAR", [X, _tensor(1, (2,), "INT32", True)],
                                                   [_tensor(2, (1, 16, 16, 3))], alignCorners=True,
                                                   halfPixelCenters=True))),
    ("gather-indices", _graph(_op(0, "GATHER", [X, _tensor(1, (2, 1), "INT32", True)], [_tensor(2, (1, 3, 8, 2))]))),
    ("broadcast", _graph(_op(0, "ADD", [X, _tensor(1, (1, 3, 4, 8))], [_tensor(2, IMAGE)]))),
    ("dynamic-shape", _graph(_op(0, "RELU", [_tensor(1, IMAGE, signature=(-1, 3, 8, 8))], [_tensor(2, IMAGE)]))),
    ("op-version", _graph(_op(0, "SOFTMAX", [X], [_tensor(1, IMAGE)], version=5))),
    ("rank", _graph(_op(0, "CONV_2D", [_tensor(1, (3, 8, 8)), _tensor(2, (8, 3, 3, 3), constant=True)],
                        [_tensor(3, (8, 8, 8))]))),
    ("unsupported-op", _graph(_op(0, "CUSTOM", [X], [_tensor(1, IMAGE)], custom_code="MyOp"))),
    ("softmax-beta-legacy", _graph(_op(0, "SOFTMAX", [X], [_tensor(1, IMAGE)], beta=0.5))),
]


@pytest.mark.parametrize(("rule", "graph"), SYNTHETIC, ids=[r for r, _ in SYNTHETIC])
def test_rules_on_synthetic_ops(rule, graph):
    assert rule in {v.rule for v in check_static(graph)}


def test_fp16_dequantize_into_fc_is_reported():
    weights16 = _tensor(1, (8, 8), "FLOAT16", constant=True)
    deq = _op(0, "DEQUANTIZE", [weights16], [_tensor(2, (8, 8))])
    fc = _op(1, "FULLY_CONNECTED", [_tensor(3, TOKENS), deq.outputs[0]], [_tensor(4, (5, 8))])
    found = {v.rule: v.severity for v in check_static(_graph(deq, fc))}
    assert found.get("fc-dequantize-input") == "warning" and "int8-weight-only-fc" not in found


def test_align_corners_alone_is_a_device_ban_not_a_source_rule():
    op = _op(0, "RESIZE_BILINEAR", [X, _tensor(1, (2,), "INT32", True)], [_tensor(2, (1, 16, 16, 3))],
             alignCorners=True, halfPixelCenters=False)
    assert {v.rule for v in check_static(_graph(op))} == {"resize-align-corners"}


def test_rule_table_is_well_formed():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert all(r.severity in ("error", "warning") and r.source and r.summary for r in RULES)
