"""Loading real upstream checkpoint layouts, written here with random weights, and refusing bad ones."""

import pytest
import torch
from safetensors.torch import load_file, save_file

from depthport.build import build
from depthport.weights import CheckpointMismatch, WeightsError
from depthport.weights.formats import OFFICIAL

from helpers import TINY_HW, image_batch, rel_l2


@pytest.fixture(scope="module")
def hf_folder(tiny_reference, tmp_path_factory):
    """A transformers-format checkpoint folder, written by transformers' own save_pretrained."""
    folder = tmp_path_factory.mktemp("hf")
    tiny_reference.model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def official_pth(tiny_weights, tmp_path_factory):
    path = tmp_path_factory.mktemp("official") / "depth_anything_v2_vitt.pth"
    torch.save(OFFICIAL.from_depthport(tiny_weights.state), path)
    return path


def test_transformers_folder_loads_like_transformers_does(tiny_spec, hf_folder):
    from transformers import DepthAnythingForDepthEstimation

    theirs = DepthAnythingForDepthEstimation.from_pretrained(hf_folder).eval()
    ours = build(tiny_spec, TINY_HW, str(hf_folder))
    assert ours.weights.format == "transformers" and ours.pos_formula == "transformers"
    x = image_batch(TINY_HW)
    with torch.no_grad():
        assert rel_l2(ours.model(x), theirs(pixel_values=x).predicted_depth) <= 1e-5


def test_official_pth_has_the_upstream_layout(official_pth):
    state = torch.load(official_pth, weights_only=True)
    assert state["pretrained.blocks.0.attn.qkv.weight"].shape == (96, 32)
    assert "depth_head.scratch.refinenet4.out_conv.weight" in state
    assert "depth_head.scratch.output_conv2.2.bias" in state


def test_official_pth_matches_the_transformers_checkpoint(tiny_spec, official_pth, hf_folder):
    hw = (56, 56)  # the tiny pretraining grid, where both position-embedding formulas agree
    a = build(tiny_spec, hw, str(official_pth))
    b = build(tiny_spec, hw, str(hf_folder))
    assert a.pos_formula == "official"
    x = image_batch(hw)
    assert rel_l2(a.model(x).detach(), b.model(x).detach()) <= 1e-6


def test_hub_cache_is_used_offline(tiny_spec, hf_folder, tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    snapshot = tmp_path / "models--acme--tiny-depth" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for name in ("model.safetensors", "config.json"):
        (snapshot / name).write_bytes((hf_folder / name).read_bytes())
    (tmp_path / "models--acme--tiny-depth" / "refs").mkdir()
    (tmp_path / "models--acme--tiny-depth" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    built = build(tiny_spec, TINY_HW, "acme/tiny-depth")
    assert built.weights.source == "hf://acme/tiny-depth" and built.weights.revision == "0123abcd"


def test_missing_hub_file_says_how_to_get_it(tiny_spec, tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(WeightsError, match=r"model.safetensors of acme/absent.*hf download acme/absent"):
        build(tiny_spec, TINY_HW, "acme/absent")


def test_mismatched_checkpoint_names_the_keys(tiny_spec, hf_folder, tmp_path):
    state = load_file(hf_folder / "model.safetensors")
    state.pop("head.conv3.bias")
    state["neck.extra.weight"] = torch.zeros(2)
    state["backbone.layernorm.weight"] = torch.zeros(5)
    save_file(state, tmp_path / "broken.safetensors")
    with pytest.raises(CheckpointMismatch) as info:
        build(tiny_spec, TINY_HW, str(tmp_path / "broken.safetensors"))
    assert info.value.missing == ["head.conv3.bias"]
    assert info.value.unexpected == ["neck.extra.weight"]
    assert "backbone.layernorm.weight" in str(info.value)


def test_checkpoint_of_another_size_is_refused(hf_folder):
    from depthport.registry import get_spec

    with pytest.raises(CheckpointMismatch, match="wrong shape"):
        build(get_spec("da2-small"), (518, 518), str(hf_folder))


@pytest.mark.parametrize("weights,message", [
    ("missing/ckpt.pth", "checkpoint not found"),
    ("./nowhere.safetensors", "checkpoint not found"),
    ("not a repo id", "not 'random'"),
])
def test_bad_weight_arguments(tiny_spec, weights, message):
    with pytest.raises(WeightsError, match=message):
        build(tiny_spec, TINY_HW, weights)


def test_unreadable_checkpoint(tiny_spec, tmp_path):
    bad = tmp_path / "junk.pth"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(WeightsError, match="cannot read checkpoint"):
        build(tiny_spec, TINY_HW, str(bad))


def test_random_weights_are_seeded(tiny_spec):
    from depthport.build import resolve_weights

    a, b = resolve_weights(tiny_spec, "random"), resolve_weights(tiny_spec, "random")
    assert a.random and all(torch.equal(a.state[k], b.state[k]) for k in a.state)


def test_released_weights_wait_on_disk_and_come_back_equal(tiny_spec):
    import gc
    import os

    from depthport.build import build, resolve_weights

    weights = resolve_weights(tiny_spec, "random")
    kept = {k: v.clone() for k, v in weights.state.items()}
    assert not weights.release()  # a tiny model's weights stay in memory (below RELEASE_BYTES)
    assert weights._state is not None
    assert weights.release(min_bytes=0)
    assert weights._state is None and os.path.getsize(weights._spill) > 0
    spill = weights._spill
    assert all(torch.equal(weights.state[k], kept[k]) for k in kept)  # read back on use
    assert weights.release(min_bytes=0) and weights._spill == spill  # written once
    a, b = build(tiny_spec, TINY_HW, weights), build(tiny_spec, TINY_HW, "random")
    x = image_batch(TINY_HW)
    with torch.no_grad():
        assert torch.equal(a.model(x), b.model(x))
    del weights, a
    gc.collect()
    assert not os.path.exists(spill)  # the temporary file goes with the weights


def test_a_released_model_waits_on_disk_and_comes_back_equal(tiny_spec):
    """``Built.release``: every parameter and buffer (non-persistent ones included) emptied, and read back into the
    same module objects by the next use of ``model``, which then computes what it computed before."""
    import os

    from depthport.build import build

    built = build(tiny_spec, TINY_HW, "random")
    x = image_batch(TINY_HW)
    with torch.no_grad():
        before = built.model(x)
    module, count = built._model, built.parameter_count
    assert not built.release()  # a tiny model stays in memory (below RELEASE_BYTES)
    assert built.release(min_bytes=0) and os.path.getsize(built._spill) > 0
    spill = built._spill
    assert all(t.numel() == 0 for t in (*module.parameters(), *module.buffers()))
    assert built.parameter_count == count and built.prompt_hw is None and built._spill == spill  # not read back
    with torch.no_grad():
        assert built.model is module and torch.equal(built.model(x), before)
    assert built._spill is None and not os.path.exists(spill)


# ------------------------------------------------------------------------------------------------------ fine-tunes
def test_official_layout_in_safetensors_loads_as_official(tiny_spec, tiny_weights, official_pth, tmp_path):
    """Distill-Any-Depth publishes the official Depth-Anything-V2 key layout as .safetensors: the keys, not the
    suffix, say which layout a file has."""
    path = tmp_path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in OFFICIAL.from_depthport(tiny_weights.state).items()}, str(path))
    hw = (56, 56)
    a, b = build(tiny_spec, hw, str(path)), build(tiny_spec, hw, str(official_pth))
    assert a.weights.format == "official" and a.pos_formula == "official"
    x = image_batch(hw)
    assert rel_l2(a.model(x).detach(), b.model(x).detach()) == 0.0


def test_distill_any_depth_hub_release_loads_from_its_folder(tiny_weights, tmp_path, monkeypatch):
    """``--weights xingyang1/Distill-Any-Depth`` reads ``small/model.safetensors`` of that repo (official layout),
    and the card's base-model chain comes from the repo's model card."""
    import dataclasses

    import huggingface_hub.constants as constants

    from depthport.registry import get_spec

    spec = dataclasses.replace(get_spec("distill-any-depth-small"), config="tiny")
    snapshot = tmp_path / "models--xingyang1--Distill-Any-Depth" / "snapshots" / "0123abcd"
    (snapshot / "small").mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in OFFICIAL.from_depthport(tiny_weights.state).items()},
              str(snapshot / "small" / "model.safetensors"))
    (snapshot / "README.md").write_text("---\nlicense: apache-2.0\nbase_model:\n- depth-anything/Depth-Anything-V2-Small\n---\n# card\n")
    (tmp_path / "models--xingyang1--Distill-Any-Depth" / "refs").mkdir()
    (tmp_path / "models--xingyang1--Distill-Any-Depth" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    built = build(spec, (56, 56), "xingyang1/Distill-Any-Depth")
    assert built.weights.format == "official" and built.weights.revision == "0123abcd"
    assert built.weights.base_models == ("depth-anything/Depth-Anything-V2-Small",)


def test_declared_base_models_read_the_card_then_the_config(tmp_path):
    from depthport.weights.load import declared_base_models

    (tmp_path / "config.json").write_text('{"_name_or_path": "depth-anything/Depth-Anything-V2-Small-hf"}')
    assert declared_base_models(tmp_path, tmp_path / "README.md", None) == ("depth-anything/Depth-Anything-V2-Small-hf",)
    assert declared_base_models(tmp_path, None, "depth-anything/Depth-Anything-V2-Small-hf") == ()
    (tmp_path / "README.md").write_text("---\nbase_model: xingyang1/Distill-Any-Depth-Small-hf\n---\n")
    assert declared_base_models(tmp_path, tmp_path / "README.md", None) == ("xingyang1/Distill-Any-Depth-Small-hf",)
    (tmp_path / "README.md").write_text("---\nbase_model: [unclosed\n---\n")
    (tmp_path / "config.json").write_text("{not json")
    assert declared_base_models(tmp_path, tmp_path / "README.md", None) == ()
