"""The LiteRT FP32 file: interface, GPU-clean graph by construction, and parity."""

import numpy as np
import pytest

from depthport.build import build
from depthport.core.tflite_graph import graph_summary, read_graph
from depthport.runtimes import load_runner

from helpers import TINY_HW, image_batch, rel_l2

BANNED = {"GATHER_ND", "BROADCAST_TO", "TRANSPOSE_CONV", "SELECT_V2", "CAST", "RESIZE_BILINEAR",
          "RESIZE_NEAREST_NEIGHBOR", "SCATTER_ND"}


def test_signature_and_shapes(tiny_tflite):
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(tiny_tflite)).get_signature_runner("serving_default")
    (name, inp), = runner.get_input_details().items()
    (out_name, out), = runner.get_output_details().items()
    assert (name, list(inp["shape"]), inp["dtype"]) == ("args_0", [1, 3, *TINY_HW], np.float32)
    assert (out_name, list(out["shape"]), out["dtype"]) == ("output_0", [1, *TINY_HW], np.float32)


def test_graph_has_no_banned_op_and_rank_at_most_4(tiny_tflite):
    summary = graph_summary(tiny_tflite)
    assert not BANNED & set(summary["op_histogram"])
    assert summary["max_tensor_rank"] <= 4
    graph = read_graph(tiny_tflite)
    dtypes = {t.dtype for op in graph.ops for t in (*op.inputs, *op.outputs) if t is not None}
    assert "BOOL" not in dtypes


@pytest.mark.parametrize("api", ["compiled", "interpreter"])
def test_file_matches_eager_and_transformers(tiny_tflite, tiny_built, tiny_reference, api):
    x = image_batch(TINY_HW, seed=5)
    out = load_runner(tiny_tflite, api=api).run(x.numpy())
    assert rel_l2(out, tiny_built.model(x).detach()) <= 1e-5
    assert rel_l2(out, tiny_reference(x)) <= 1e-5


def test_failed_export_leaves_nothing(tiny_built, tmp_path):
    from depthport.export.litert import export_tflite

    with pytest.raises(Exception):
        export_tflite(tiny_built.model, (56, 56), tmp_path / "x.tflite")
    assert list(tmp_path.iterdir()) == []


def test_small_reexport_is_made_once_per_export_and_file_kind(tmp_path):
    """The small re-export (export.small) that the GPU check and the browser's GPU runs use: the same aspect with a
    short side of 126, one model for every file kind, each file made once; none for an export that is small."""
    from depthport.export.small import small_export

    built, memo = build("da2-tiny", (140, 168)), {}
    small = small_export(built, tmp_path, ".tflite", memo)
    assert small.hw == (126, 154) and small_export(built, tmp_path, ".tflite", memo) is small
    assert load_runner(small.path, threads=1).input_shape == (1, 3, 126, 154)
    onnx = small_export(built, tmp_path, ".onnx", memo)
    assert onnx.model is small.model and onnx.path.suffix == ".onnx" and onnx.path.is_file()
    assert small_export(build("da2-tiny", (112, 140)), tmp_path) is None
