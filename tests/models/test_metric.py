"""Metric depth at toy size: the Depth Anything V2 metric head (sigmoid x max_depth) against transformers and the
official resampling, Depth Anything 3's monocular DPT (DA3Metric / DA3Mono) against the `depth-anything-3`
package, their checkpoints, random weights, and metres through accuracy, gates, the FP16 prediction, the
licence lines and the spec's own checks. Exports, report.json, the card and `predict` of every id are in
test_registry.py."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
import torch

from depthport.build import build, resolve_weights
from depthport.errors import InputError
from depthport.registry import MODELS, get_spec
from depthport.spec import ModelSpec
from helpers import image_batch, import_or_skip, rel_l2

DA2M, DA3M = get_spec("da2-metric-tiny"), get_spec("da3-metric-tiny")
# The default shape of each tiny id, and one non-square shape of the other orientation.
SHAPES = {DA2M.id: [DA2M.default_hw, (70, 42)], DA3M.id: [DA3M.default_hw, (42, 70)]}


@pytest.fixture(scope="module")
def weights():
    return {spec.id: resolve_weights(spec, "random") for spec in (DA2M, DA3M)}


@pytest.fixture(scope="module")
def references(weights):
    import_or_skip("transformers")
    import_or_skip("depth_anything_3.cfg")
    from depthport.reference import reference_model

    return {spec.id: reference_model(spec, weights[spec.id]) for spec in (DA2M, DA3M)}


@pytest.mark.parametrize("model_id, hw", [(m, hw) for m, shapes in SHAPES.items() for hw in shapes],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v)
@torch.no_grad()
def test_export_form_matches_upstream(model_id, hw, weights, references):
    spec = get_spec(model_id)
    x = image_batch(hw, seed=5)
    ours, theirs = build(spec, hw, weights[model_id]).model(x), references[model_id](x)
    assert ours.shape == theirs.shape == tuple(spec.output_shape(hw))
    assert rel_l2(ours, theirs) <= 1e-5


def test_references_are_the_metric_heads(references):
    head = references[DA2M.id].model.head  # transformers' DepthAnythingDepthEstimationHead
    assert isinstance(head.activation2, torch.nn.Sigmoid) and head.max_depth == DA2M.max_depth
    dpt = references[DA3M.id].model.head  # the package's DPT: exp, with its sky head
    assert dpt.activation == "exp" and dpt.use_sky_head and not dpt.pos_embed


@torch.no_grad()
def test_official_pth_of_the_metric_head_matches_the_official_resampling(weights, tmp_path):
    from depthport.reference import reference_model
    from depthport.weights.formats import OFFICIAL

    state = OFFICIAL.from_depthport(weights[DA2M.id].state)
    state["pretrained.mask_token"] = torch.zeros(1, 32)
    torch.save(state, tmp_path / "depth_anything_v2_metric_hypersim_vitt.pth")
    built = build(DA2M, (70, 42), str(tmp_path / "depth_anything_v2_metric_hypersim_vitt.pth"))
    assert built.weights.format == "official" and built.pos_formula == "official"
    reference = reference_model(DA2M, built.weights)
    assert "official pos-embed resampling" in type(reference).__doc__
    x = image_batch((70, 42), seed=6)
    assert rel_l2(built.model(x), reference(x)) <= 1e-5


@torch.no_grad()
def test_random_weights_give_a_spread_metric_depth(weights):
    depth = build(DA2M, DA2M.default_hw, weights[DA2M.id]).model(image_batch(DA2M.default_hw))
    assert 0.0 < float(depth.min()) and float(depth.max()) < 0.98 * DA2M.max_depth  # not saturated
    assert float(depth.std() / depth.mean()) > 0.05
    canonical = build(DA3M, DA3M.default_hw, weights[DA3M.id]).model(image_batch(DA3M.default_hw))
    assert float(canonical.min()) > 0 and 0.1 < float(canonical.std() / canonical.mean()) < 2.0


def test_transformers_config_of_each_metric_id():
    import_or_skip("transformers")
    from depthport.reference import transformers_config

    for scene, depth in (("indoor", 20), ("outdoor", 80)):
        for size in ("small", "base", "large"):
            cfg = transformers_config(get_spec(f"da2-metric-{scene}-{size}"))
            assert cfg.depth_estimation_type == "metric" and cfg.max_depth == depth
    assert transformers_config(get_spec("da2-small")).depth_estimation_type == "relative"


@torch.no_grad()
def test_loads_the_packages_own_state_dict_sky_head_included(references, tmp_path):
    from safetensors.torch import save_file

    from depthport.weights import CheckpointMismatch

    package = references[DA3M.id].model  # random init of the package, as its hub files store it (model. prefix)
    state = {f"model.{k}": v.contiguous() for k, v in package.state_dict().items()}
    assert any("sky_output_conv2" in k for k in state)
    save_file(state, str(tmp_path / "model.safetensors"))
    built = build(DA3M, DA3M.default_hw, str(tmp_path))
    assert built.weights.format == "official-da3-mono" and not built.weights.random
    x = image_batch(DA3M.default_hw, seed=7)
    assert rel_l2(built.model(x), references[DA3M.id].__class__(DA3M, built.weights)(x)) <= 1e-5
    bad = {**state, "model.backbone.pretrained.camera_token": torch.zeros(1, 2, 32)}
    save_file(bad, str(tmp_path / "bad.safetensors"))
    with pytest.raises(CheckpointMismatch, match="camera_token"):
        build(DA3M, DA3M.default_hw, str(tmp_path / "bad.safetensors"))


def test_metric_accuracy_is_in_metres_without_alignment():
    from depthport.verify import accuracy

    disparity = np.random.default_rng(0).uniform(30, 200, (50, 74))
    disparity[:3] = np.nan
    metres = accuracy.depth_from_disparity(disparity)
    exact = accuracy.score(metres, disparity, "depth", to_metres=1.0)
    assert exact["metric"] and exact["abs_rel"] == pytest.approx(0, abs=1e-12) and exact["delta1"] == 1.0
    doubled = accuracy.score(2 * metres, disparity, "depth", to_metres=1.0)  # twice as far: no fit hides it
    assert doubled["abs_rel"] == pytest.approx(1.0) and doubled["delta1"] == 0.0
    assert doubled["mean_abs_m"] == pytest.approx(np.nanmean(metres[3:]))
    assert doubled["aligned"]["abs_rel"] == pytest.approx(0, abs=1e-9)  # the aligned figures are kept apart
    canonical = accuracy.score(metres * 300 / 500.0, disparity, "depth", to_metres=500.0 / 300)
    assert canonical["abs_rel"] == pytest.approx(0, abs=1e-12)
    with pytest.raises(ValueError, match="depth-space"):
        accuracy.score(metres, disparity, "inverse depth", to_metres=1.0)


def test_metres_factor_uses_the_focal_length_at_the_input_size():
    from depthport.verify import accuracy

    image_hw = (500, 741)
    assert accuracy.metres_factor(get_spec("da2-small").units(), (518, 686), image_hw) is None
    assert accuracy.metres_factor(DA2M.units(), (518, 686), image_hw) == 1.0
    focal = accuracy.focal_at((250, 741), image_hw)  # height halved, width kept: the mean of both scales
    assert focal == pytest.approx(accuracy.FOCAL_PX * 0.75)
    assert accuracy.metres_factor(DA3M.units(), (250, 741), image_hw) == pytest.approx(focal / 300)


def test_gates_in_metres_for_metric_models():
    from depthport.verify import gates

    assert all("mean_abs_worst" not in limits for limits in gates.thresholds().values())
    metric = gates.thresholds(["int8.mean_abs=0.3"], metric=True)
    assert metric["int8"]["mean_abs_worst"] == 0.3 and metric["fp16"]["mean_abs_worst"] == 0.05
    assert metric["fp32"]["pearson_worst"] == gates.DEFAULTS["fp32"]["pearson_worst"]  # relative gates stay
    parity = {"delta125_worst": 0.995, "mean_abs_worst": 0.8}
    verdict = gates.evaluate(parity, "int8", metric, gates.unit_label(get_spec("da2-metric-outdoor-large").units()))
    assert verdict["state"] == "fail" and verdict["reasons"] == ["mean_abs_worst 0.8 m > 0.3 m"]
    canonical = gates.evaluate(parity, "int8", metric, gates.unit_label(DA3M.units()))
    assert canonical["reasons"] == ["mean_abs_worst 0.8 m at focal 300 px > 0.3 m at focal 300 px"]


def test_fp16_prediction_of_a_metric_model_is_judged_in_metres(weights):
    from depthport.check.fp16_compute import METRIC_TOLERANCE_M, fp16_verdict, predict_fp16

    model = build(DA2M, DA2M.default_hw, weights[DA2M.id]).model
    entry = predict_fp16(model, DA2M.default_hw, unit="m")
    assert entry["unit"] == "m" and entry["tolerance_m"] == METRIC_TOLERANCE_M
    assert 0 < entry["mean_abs_worst"] < METRIC_TOLERANCE_M and fp16_verdict(entry).ok
    worse = {**entry, "mean_abs_worst": 0.2, "needs_enforce_f32": True}
    verdict = fp16_verdict(worse)
    assert verdict.state == "fail" and "mean error 0.2 m > 0.05 m" in verdict.reason
    assert verdict.figures["mean_abs_worst"] == 0.2 and verdict.thresholds["mean_abs_worst"] == METRIC_TOLERANCE_M


def test_spec_checks_the_output_meaning():
    fields = {f.name: getattr(DA2M, f.name) for f in dataclasses.fields(ModelSpec)}
    with pytest.raises(ValueError, match="output_meaning"):
        ModelSpec(**{**fields, "output_meaning": "millimetres"})
    with pytest.raises(ValueError, match="max_depth"):
        ModelSpec(**{**fields, "config": "tiny"})  # metres from a ReLU head
    with pytest.raises(ValueError, match="focal_reference"):
        ModelSpec(**{**fields, "output_meaning": "canonical depth"})
    with pytest.raises(ValueError, match="inverse-depth"):
        ModelSpec(**{**fields, "output_space": "inverse depth"})


def test_models_lists_output_units_and_licences(capsys):
    from depthport.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for model_id in ("da2-metric-indoor-small", "da2-metric-outdoor-large", "da3-base", "da3-metric-large",
                     "da3-mono-large"):
        assert model_id in out
    assert "metres (0-20 m)" in out and "metres (0-80 m)" in out and "x focal_px / 300" in out
    assert "(non-commercial)" in out and "issue #245" in out and "tiny" not in out
    licences = {m: MODELS[m].licence for m in ("da2-metric-indoor-small", "da2-metric-outdoor-base",
                                                "da2-metric-indoor-large", "da3-base", "da3-metric-large")}
    assert licences == {"da2-metric-indoor-small": "Apache-2.0", "da2-metric-outdoor-base": "CC-BY-NC-4.0",
                        "da2-metric-indoor-large": "CC-BY-NC-4.0", "da3-base": "Apache-2.0",
                        "da3-metric-large": "Apache-2.0"}


def test_export_prints_the_licence_of_non_commercial_weights(tmp_path):
    from rich.console import Console

    from depthport.cli.export import licence_notice
    from depthport.pipeline import ExportOptions

    def printed(model_id: str, weights: str) -> str:
        out = io.StringIO()
        opts = ExportOptions(model=model_id, weights=weights, input_hw=(518, 686), out_dir=tmp_path,
                             targets=("litert-fp32",))
        licence_notice(Console(file=out, width=300), opts)
        return out.getvalue()

    line = printed("da2-metric-outdoor-large", MODELS["da2-metric-outdoor-large"].hf_repo)
    assert "CC-BY-NC-4.0" in line and "non-commercial" in line and line.count("\n") == 1
    assert printed("da2-metric-outdoor-large", "random") == ""  # random weights carry no licence
    assert printed("da2-metric-outdoor-small", MODELS["da2-metric-outdoor-small"].hf_repo) == ""


def test_predict_refuses_focal_without_a_report(tmp_path):
    from depthport.predict import check_focal

    with pytest.raises(InputError, match="no report.json"):
        check_focal(None, 500.0, tmp_path / "model.tflite", "photo.jpg")
    check_focal(None, None, tmp_path / "model.tflite", "photo.jpg")


@pytest.mark.parametrize("config, message", [
    ({"depth_estimation_type": "metric", "max_depth": 80}, "max_depth 80 m"),
    ({"depth_estimation_type": "relative"}, "is a relative depth checkpoint"),
    ({"depth_estimation_type": "metric", "max_depth": 20}, None),
])
def test_transformers_config_must_match_the_metric_head(weights, tmp_path, config, message):
    """Indoor, outdoor and relative checkpoints share their keys: config.json tells them apart."""
    import json

    from safetensors.torch import save_file

    from depthport.weights import WeightsError
    from depthport.weights.formats import TRANSFORMERS

    save_file({k: v.contiguous() for k, v in TRANSFORMERS.from_depthport(weights[DA2M.id].state).items()},
              str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(config))
    if message is None:
        assert resolve_weights(DA2M, str(tmp_path)).format == "transformers"
    else:
        with pytest.raises(WeightsError, match=message):
            resolve_weights(DA2M, str(tmp_path))


def test_official_file_name_must_match_the_metric_head(weights, tmp_path):
    from depthport.weights import WeightsError
    from depthport.weights.formats import OFFICIAL

    state = {**OFFICIAL.from_depthport(weights[DA2M.id].state), "pretrained.mask_token": torch.zeros(1, 32)}
    torch.save(state, tmp_path / "depth_anything_v2_metric_vkitti_vits.pth")
    with pytest.raises(WeightsError, match="max_depth 80 m .its file name"):
        resolve_weights(DA2M, str(tmp_path / "depth_anything_v2_metric_vkitti_vits.pth"))
    with pytest.raises(WeightsError, match="is a metric depth checkpoint"):
        resolve_weights(get_spec("da2-tiny"), str(tmp_path / "depth_anything_v2_metric_vkitti_vits.pth"))


def test_da3_preset_in_config_json_must_match_the_id(tmp_path):
    """DA3Metric-Large and DA3Mono-Large share keys and shapes: the package's config.json (model_name) decides."""
    import json

    from depthport.weights import WeightsError
    from depthport.weights.load_da3 import check_preset

    file = tmp_path / "model.safetensors"
    (tmp_path / "config.json").write_text(json.dumps({"model_name": "da3mono-large"}))
    with pytest.raises(WeightsError, match="preset 'da3mono-large'.*use da3-mono-large"):
        check_preset(get_spec("da3-metric-large"), file, str(tmp_path))
    check_preset(get_spec("da3-mono-large"), file, str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"model_name": "da3metric-large"}))
    check_preset(get_spec("da3-metric-large"), file, str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(WeightsError, match="cannot read"):
        check_preset(get_spec("da3-mono-large"), file, str(tmp_path))
