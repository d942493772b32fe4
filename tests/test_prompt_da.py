"""Prompt Depth Anything (#25, first part): the architecture against transformers' reference, its exact rewrites,
the two-input LiteRT file (named inputs, GPU rules statically and on the accelerator), and the pipeline's refusal."""

import numpy as np
import pytest
import torch

from depthport.build import build
from depthport.cli import main
from depthport.models.layers import Resize
from depthport.registry import MODELS, get_spec, tiny_spec

from helpers import rel_l2, vulkan_or_skip

SPEC = get_spec("prompt-da-tiny")
HW = (56, 70)


def inputs(hw, prompt_hw, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 3, *hw, generator=g), 0.5 + 3.0 * torch.rand(1, 1, *prompt_hw, generator=g)


@pytest.fixture(scope="module")
def weights():
    return build(SPEC, HW, "random", rewrites=[]).weights


@pytest.fixture(scope="module")
def reference(weights):
    return SPEC.arch.reference(SPEC, weights)


@pytest.mark.parametrize("hw, prompt_hw", [(HW, (192, 256)), ((70, 56), (256, 192)), ((42, 98), (24, 32))])
def test_reference_and_export_forms_match_transformers(weights, reference, hw, prompt_hw):
    """Landscape ARKit prompt, portrait, and a prompt finer than the coarsest map: within 1e-5 rel. L2."""
    x, p = inputs(hw, prompt_hw)
    want = reference(x, p)
    for rewrites in ([], None):
        model = build(SPEC, hw, weights, rewrites=rewrites, prompt_hw=prompt_hw).model
        with torch.no_grad():
            assert rel_l2(model(x, p), want) <= 1e-5


def test_depth_is_in_metres_within_the_prompt_range_and_follows_the_prompt(weights):
    model = build(SPEC, HW, weights).model
    x, p = inputs(HW, (192, 256))
    with torch.no_grad():
        depth = model(x, p)
        scaled = model(x, 2.0 * p)  # a prompt twice as far: the same normalised prompt, depth twice as far
        flipped = model(x, p.flip(-1))  # the same range, another layout: another depth map
    assert float(p.min()) <= float(depth.min()) and float(depth.max()) <= float(p.max())
    assert float(depth.std()) > 0.05
    assert rel_l2(scaled, 2.0 * depth) <= 1e-5 and rel_l2(flipped, depth) > 1e-3


def test_prompt_resize_matrices_are_align_corners_false_bilinear():
    x = torch.randn(1, 1, 192, 256, generator=torch.Generator().manual_seed(0))
    for out_hw in ((5, 6), (14, 18), (112, 140)):
        exact = Resize((192, 256), out_hw, "exact", chunks=4, align_corners=False)
        want = torch.nn.functional.interpolate(x, size=out_hw, mode="bilinear", align_corners=False)
        assert rel_l2(exact(x), want) <= 1e-6


def test_registry_ids_licences_and_defaults():
    ids = ("prompt-da-small", "prompt-da-large", "prompt-da-small-transparent")
    for model_id in ids:
        spec = MODELS[model_id]
        assert spec.prompted and spec.prompt_hw == (192, 256) and spec.default_hw == (756, 1008)
        assert spec.licence == "Apache-2.0" and spec.hf_repo in spec.licence_note
        assert spec.units()["unit"] == "m" and "prompt" in spec.units()["line"]
        assert tiny_spec(spec).id == "prompt-da-tiny" and not MODELS[model_id].hidden
    assert MODELS["prompt-da-large"].model_config.vit.dim == 1024
    assert MODELS["prompt-da-small"].hf_repo == "depth-anything/prompt-depth-anything-vits-hf"


def test_transformers_checkpoint_loads_and_a_da2_one_is_refused(weights, reference, tmp_path):
    from depthport.weights import WeightsError

    reference.model.save_pretrained(tmp_path / "prompt")
    loaded = build(SPEC, HW, str(tmp_path / "prompt"), rewrites=[])
    assert all(torch.equal(loaded.weights.state[k], v) for k, v in weights.state.items())
    da2 = get_spec("da2-tiny").arch.reference(get_spec("da2-tiny"), build("da2-tiny", HW).weights)
    da2.model.save_pretrained(tmp_path / "da2")
    with pytest.raises(WeightsError, match="depth_anything checkpoint .* prompt-da-tiny takes a prompt depth"):
        build(SPEC, HW, str(tmp_path / "da2"))
    with pytest.raises(WeightsError, match="prompt_depth_anything checkpoint .* da2-tiny does not take"):
        build("da2-tiny", HW, str(tmp_path / "prompt"))


@pytest.mark.parametrize("argv", [["export", "prompt-da-small", "--weights", "random"],
                                  ["verify", "MODEL", "--reference", "prompt-da-small", "--weights", "random"]])
def test_pipeline_refuses_prompted_models_in_one_line(argv, tmp_path, capsys):
    (tmp_path / "m.tflite").write_bytes(b"")
    argv = [str(tmp_path / "m.tflite") if a == "MODEL" else a for a in argv]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "prompt depth" in err and "benchmarks/prompt_da.py" in err
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def tflite(weights, tmp_path_factory):
    from depthport.export.litert import export_tflite

    model = build(SPEC, HW, weights).model
    return model, export_tflite(model, HW, tmp_path_factory.mktemp("prompt") / "prompt_da_tiny.tflite")


def test_litert_file_has_named_inputs_passes_the_gpu_rules_and_matches_eager(tflite):
    from ai_edge_litert.interpreter import Interpreter

    from depthport.check.static import check_static, has_errors

    model, path = tflite
    interpreter = Interpreter(str(path))
    assert interpreter.get_signature_list()["serving_default"]["inputs"] == ["image", "prompt"]
    x, p = inputs(HW, (192, 256), seed=3)
    (out,) = interpreter.get_signature_runner()(image=x.numpy(), prompt=p.numpy()).values()
    with torch.no_grad():
        assert rel_l2(torch.from_numpy(np.asarray(out)), model(x, p)) <= 1e-5
    assert not has_errors(check_static(path))


@pytest.mark.gpu
def test_litert_file_runs_fully_on_the_gpu_accelerator(tflite):
    from depthport.check.gpu_runtime import run_gpu_check

    vulkan_or_skip()
    result = run_gpu_check(tflite[1])
    assert result["fully_delegated"] is True and result["rejected_ops"] == [], result["note"]
    assert result["numeric_ok"] and result["rel_l2_vs_cpu"] < 1e-4
