"""Every registered model id, through the tiny config of its architecture: built from its spec alone with the
default rewrites, exported to LiteRT FP32, run, and equal to the eager export-form model; the spec's facts
(pretraining shape, output space and shape, weight formats, preprocessing) checked against its config.

Ids that share a tiny config (da2-small/base/large) share one export: each distinct tiny config is exported once.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from depthport.registry import MODELS, tiny_spec
from depthport.spec import OUTPUT_SPACES, ModelSpec

from helpers import TINY_HW, image_batch, rel_l2

IDS = list(MODELS)
TINY_IDS = sorted({tiny_spec(spec).id for spec in MODELS.values()})


@dataclasses.dataclass
class TinyExport:
    built: object
    path: object
    eager: np.ndarray
    tflite: np.ndarray


@pytest.fixture(scope="module")
def tiny_export(request, tmp_path_factory):
    """tiny id -> its `TinyExport`, made on first use (a `-k` selection exports only what it needs). The
    session's own tiny export (conftest's ``tiny_tflite``: random weights, default rewrites) is reused when it
    is the same config at the same shape."""
    cache: dict[str, TinyExport] = {}

    def get(tiny_id: str) -> TinyExport:
        if tiny_id not in cache:
            spec = MODELS[tiny_id]
            if spec is request.getfixturevalue("tiny_spec") and spec.default_hw == TINY_HW:
                cache[tiny_id] = _run(request.getfixturevalue("tiny_built"), request.getfixturevalue("tiny_tflite"))
            else:
                cache[tiny_id] = _export(spec, tmp_path_factory.mktemp(tiny_id))
        return cache[tiny_id]

    return get


def _export(spec: ModelSpec, folder) -> TinyExport:
    from depthport.build import build
    from depthport.export.litert import export_tflite
    from depthport.quiet import native_stderr_muted
    from depthport.rewrites import default_rewrites

    built = build(spec, spec.default_hw, "random", rewrites=default_rewrites())
    with native_stderr_muted():
        path = export_tflite(built.model, spec.default_hw, folder / f"{spec.id.replace('-', '_')}_fp32.tflite")
    return _run(built, path)


def _run(built, path) -> TinyExport:
    from depthport.quiet import native_stderr_muted
    from depthport.runtimes import load_runner

    x = image_batch(built.input_hw, seed=4)
    with native_stderr_muted():
        out = np.asarray(load_runner(path).run(x.numpy()))
    with torch.no_grad():
        eager = built.model(x).numpy()
    return TinyExport(built, path, eager, out)


@pytest.mark.parametrize("model_id", IDS)
def test_every_id_names_a_registered_tiny_config_of_its_architecture(model_id):
    spec = MODELS[model_id]
    tiny = tiny_spec(spec)
    assert tiny.arch is spec.arch and tiny.config == spec.tiny and tiny.tiny == spec.tiny
    assert tiny is spec or tiny.hidden
    h, w = tiny.default_hw
    assert h % 14 == 0 and w % 14 == 0 and max(h, w) <= 14 * 8, "the tiny shape must stay small"
    # what the tests show for the tiny config holds for the id: same output meaning and position formula
    for name in ("output", "output_space", "channel_dim", "pos_formula"):
        assert getattr(tiny, name) == getattr(spec, name), name


@pytest.mark.parametrize("model_id", IDS)
def test_tiny_litert_export_runs_and_matches_eager(model_id, tiny_export):
    from depthport.rewrites import default_rewrites

    spec = MODELS[model_id]
    tiny = tiny_spec(spec)
    made = tiny_export(tiny.id)
    assert made.built.spec is tiny and made.built.rewrites == default_rewrites()
    assert made.path.stat().st_size > 0
    expected = tuple(spec.output_shape(tiny.default_hw))
    assert made.tflite.shape == made.eager.shape == expected
    assert rel_l2(made.tflite, made.eager) <= 1e-5
    assert np.isfinite(made.tflite).all() and made.tflite.std() > 0


@pytest.mark.parametrize("model_id", IDS)
def test_pretrain_shape_and_output_space_follow_the_config(model_id):
    from depthport.models.dinov2 import DinoV2

    spec = MODELS[model_id]
    vit = spec.model_config.vit
    side = vit.patch * vit.pretrain_grid
    assert spec.pretrain_hw == (side, side)
    if not spec.hidden:
        assert spec.pretrain_hw == (518, 518)  # every released Depth Anything checkpoint: 37x37 patches of 14
    with torch.device("meta"):  # the shapes only: no memory for the large sizes
        encoder = DinoV2(vit, spec.pretrain_hw)
    assert encoder.grid_hw == (vit.pretrain_grid, vit.pretrain_grid)
    assert encoder.pos_embed.shape[1] == 1 + encoder.grid_hw[0] * encoder.grid_hw[1]
    assert spec.output_space in OUTPUT_SPACES
    order = "larger = nearer" if spec.output_space == "inverse depth" else "larger = farther"
    assert order in spec.output
    assert ("[1, 1, H, W]" if spec.channel_dim else "[1, H, W]") in spec.output
    assert ("inverse depth" in spec.output) == (spec.output_space == "inverse depth")


@pytest.mark.parametrize("tiny_id", TINY_IDS)
def test_pretrain_shape_is_where_the_position_table_is_used_as_stored(tiny_id, tiny_export):
    from depthport.build import architecture

    spec = MODELS[tiny_id]
    weights = tiny_export(tiny_id).built.weights
    tables = {}
    for formula in ("official", "transformers"):
        model = architecture(spec, spec.pretrain_hw, formula)
        model.load_state_dict(weights.state)
        tables[formula] = model.encoder.position_embedding().detach()
    stored = weights.state["encoder.pos_embed"]
    assert torch.equal(tables["official"], stored) and torch.equal(tables["transformers"], stored)


def _write(state: dict, path) -> str:
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state, path)
    return str(path)


@pytest.mark.parametrize("tiny_id", TINY_IDS)
def test_every_accepted_weight_format_loads_back(tiny_id, tiny_export, tmp_path):
    from depthport.build import resolve_weights

    spec = MODELS[tiny_id]
    weights = tiny_export(tiny_id).built.weights
    assert spec.arch.weight_formats
    for fmt in spec.arch.weight_formats:
        path = _write(fmt.from_depthport(weights.state), tmp_path / f"ckpt_{fmt.name}{fmt.suffix}")
        loaded = resolve_weights(spec, path)
        assert loaded.format == fmt.name and not loaded.random
        assert loaded.state.keys() == weights.state.keys()
        assert all(torch.equal(loaded.state[k], v) for k, v in weights.state.items())


@pytest.mark.parametrize("model_id", IDS)
def test_predict_prepares_images_as_the_spec_says(model_id, tmp_path):
    from depthport.predict import model_input
    from depthport.preprocess import to_tensor

    spec = MODELS[model_id]
    hw = tiny_spec(spec).default_hw
    pixels = np.random.default_rng(2).integers(0, 256, (150, 90, 3), dtype=np.uint8)
    img = Image.fromarray(pixels)
    model_path = tmp_path / "model.tflite"
    assert np.array_equal(model_input(img, model_path, hw), to_tensor(img, hw))  # no report: a stretch
    (tmp_path / "report.json").write_text(json.dumps({"model": model_id}))
    assert np.array_equal(model_input(img, model_path, hw), spec.preprocess(img, hw))
    assert np.array_equal(model_input(img, model_path, hw, letterbox=True), to_tensor(img, hw, letterbox=True))
    (tmp_path / "report.json").write_text(json.dumps({"model": model_id, "normalization": "folded (RGB 0..1)"}))
    assert np.array_equal(model_input(img, model_path, hw), spec.preprocess(img, hw, normalize=False))


def test_spec_is_keyword_only_frozen_and_checked():
    spec = MODELS["da2-tiny"]
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(ModelSpec)}
    with pytest.raises(TypeError):
        ModelSpec(*fields.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.config = "small"
    with pytest.raises(ValueError, match="no depth-anything-v2 config 'huge'"):
        ModelSpec(**{**fields, "config": "huge"})
    with pytest.raises(ValueError, match="output_space"):
        ModelSpec(**{**fields, "output_space": "disparity"})
    assert isinstance(spec.family, str) and spec.family == spec.arch.name


def test_registry_and_predict_import_without_torch():
    code = "import sys, depthport.registry, depthport.predict; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
