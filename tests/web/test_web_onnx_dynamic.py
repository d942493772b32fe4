"""`--targets onnx-dynamic`: one .onnx with symbolic H and W (multiples of 14), verified against the upstream model
at three shapes in the export, and equal to the static export form at any shape (both position-embedding formulas)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import TINY_HW, image_batch, rel_l2

SHAPES = [(56, 70), (56, 56), (42, 84)]


@pytest.fixture(scope="session")
def dynamic_export(tmp_path_factory, tiny_weights):
    from depthport.export.context import StageOptions
    from depthport.pipeline import ExportOptions, run_export
    from depthport.core.images import builtin_image

    images = tmp_path_factory.mktemp("dyn-images")
    builtin_image("coffee").save(images / "coffee.png")
    out = tmp_path_factory.mktemp("dyn") / "out"
    opts = ExportOptions(model="da2-tiny", weights=tiny_weights, input_hw=TINY_HW, out_dir=out,
                         targets=("onnx-dynamic",), stages=StageOptions(images=str(images), skip={"ledger", "bench"}))
    return run_export(opts), out


def test_export_verifies_three_shapes(dynamic_export):
    report, out = dynamic_export
    art = report["artifacts"][0]
    assert art["target"] == "onnx-dynamic" and art["status"] == "shipped", art["status_reason"]
    assert art["verify_shapes"] == [list(s) for s in SHAPES]
    assert art["checks"]["parity_shapes"]["state"] == "pass" and art["checks"]["parity_shapes"]["required"]
    for hw, entry in art["shapes_parity"].items():
        assert entry["gate"]["state"] == "pass", hw
        assert entry["rel_l2_pooled"] <= 2e-6 and entry["fp64_error_ratio"] is not None
    assert set(art["shapes_parity"]) == {"56x56", "42x84"}
    card = (out / "README.md").read_text()
    assert "## Dynamic shapes" in card and "56x70 (export), 56x56, 42x84" in card


def test_file_has_symbolic_height_and_width(dynamic_export):
    import onnxruntime as ort

    from depthport.runtimes import load_runner

    report, out = dynamic_export
    path = out / report["artifacts"][0]["file"]
    dims = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_inputs()[0].shape
    assert dims[:2] == [1, 3] and all(isinstance(d, str) for d in dims[2:])
    runner = load_runner(path)
    assert runner.dynamic and runner.input_shape == (1, 3, *TINY_HW)
    assert runner.run(np.zeros((1, 3, 28, 98), np.float32)).shape == (1, 28, 98)
    with pytest.raises(ValueError, match="takes input"):
        runner.run(np.zeros((1, 3, 30, 98), np.float32))


@pytest.mark.parametrize("formula", ["official", "transformers"])
def test_dynamic_form_equals_the_static_export_form(tiny_spec, tiny_weights, formula):
    """At the pretraining grid (56x56 here: 4x4 patches) upstream skips resampling; elsewhere both formulas (the
    export above uses the random weights' transformers formula)."""
    from depthport.build import build
    from depthport.export.dynamic import SHAPE_BOUND, DynamicDA2
    from depthport.rewrites import default_rewrites

    names = [r for r in default_rewrites() if r not in SHAPE_BOUND]
    dynamic = DynamicDA2(build(tiny_spec, TINY_HW, tiny_weights, rewrites=names, pos_formula=formula).model)
    for hw in [(56, 56), (42, 84), (70, 42)]:
        static = build(tiny_spec, hw, tiny_weights, pos_formula=formula).model
        x = image_batch(hw)
        with torch.no_grad():
            assert rel_l2(dynamic(x), static(x)) < 2e-6, hw


def test_dynamic_refuses_other_families(tmp_path, capsys):
    from depthport.cli import main

    out = tmp_path / "out"
    assert main(["export", "da3-tiny", "--weights", "random", "--size", "28x28", "--targets", "onnx-dynamic",
                 "--out", str(out), "--skip", "ledger,bench,report,card", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "onnx-dynamic" in err[0] and not out.exists()
