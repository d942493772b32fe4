"""ONNX target on the tiny model: export -> graph summary -> run through onnxruntime -> compare with eager."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depthport.build import build
from depthport.export.targets import ExportContext, load_all
from depthport.preprocess import InputError, to_tensor
from depthport.runtimes import load_runner
from depthport.core.images import builtin_image

HW = (56, 70)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    built = build("da2-tiny", HW)
    ctx = ExportContext(built, tmp_path_factory.mktemp("onnx"), "da2_tiny")
    return ctx, load_all()["onnx"](ctx)


def test_onnx_is_one_file_with_its_op_histogram(exported):
    import onnx

    ctx, entry = exported
    assert entry["file"] == "da2_tiny.onnx" and entry["precision"] == "fp32"
    assert [p.name for p in ctx.out_dir.iterdir()] == ["da2_tiny.onnx"]
    model = onnx.load(str(ctx.out_dir / entry["file"]))
    assert not any(onnx.external_data_helper.uses_external_data(t) for t in model.graph.initializer)
    assert entry["opset"] >= 18
    assert entry["op_count"] == sum(entry["op_histogram"].values()) > 0
    assert entry["op_histogram"].get("MatMul", 0) + entry["op_histogram"].get("Gemm", 0) > 0


def test_onnxruntime_matches_eager(exported):
    ctx, entry = exported
    x = to_tensor(builtin_image("chelsea"), HW)
    with torch.no_grad():
        eager = ctx.built.model(torch.from_numpy(x)).numpy()
    runner = load_runner(ctx.out_dir / entry["file"], threads=1)
    assert runner.runtime == "onnxruntime" and runner.input_shape == (1, 3, *HW)
    assert runner._session.get_session_options().intra_op_num_threads == 1
    out = runner.run(x)
    assert out.dtype == np.float32 and out.shape == (1, *HW)
    assert np.linalg.norm(out - eager) / np.linalg.norm(eager) <= 1e-5


def test_onnx_runner_rejects_wrong_shape_and_bad_file(exported, tmp_path):
    ctx, entry = exported
    runner = load_runner(ctx.out_dir / entry["file"])
    with pytest.raises(InputError, match="takes input"):
        runner.run(np.zeros((1, 3, 28, 42), np.float32))
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(InputError):
        load_runner(bad)
