"""Every registered model id, through the tiny config of its architecture: built from its spec alone with the
default rewrites, exported to LiteRT FP32, run, equal to the eager export-form model and GPU-clean; the spec's
facts (pretraining shape, output space, meaning and shape, weight formats, preprocessing) checked against its
config; its output's meaning and units carried through report.json, the model card and `predict`.

Ids that share a tiny config (da2-small/base/large) share one export: each distinct tiny config is exported once
(da3-metric-tiny and da3-mono-tiny are one architecture, so one export, with a report each).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from depthport.registry import MODELS, tiny_spec
from depthport.spec import OUTPUT_SPACES, ModelSpec

from helpers import TINY_HW, image_batch, rel_l2, save_checkpoint

IDS = list(MODELS)
TINY_IDS = sorted({tiny_spec(spec).id for spec in MODELS.values()})
# What the export pipeline runs: one image in. Prompted ids (Prompt Depth Anything) are tested in test_prompt_da.py.
PIPELINE_IDS = [i for i in IDS if not MODELS[i].prompted]
PIPELINE_TINY_IDS = [i for i in TINY_IDS if not MODELS[i].prompted]


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
    cache: dict[tuple, TinyExport] = {}

    def get(tiny_id: str) -> TinyExport:
        spec = MODELS[tiny_id]
        key = (spec.arch.name, spec.model_config, spec.default_hw)  # one export per distinct architecture
        if key not in cache:
            if spec is request.getfixturevalue("tiny_spec") and spec.default_hw == TINY_HW:
                cache[key] = _run(request.getfixturevalue("tiny_built"), request.getfixturevalue("tiny_tflite"))
            else:
                cache[key] = _export(spec, tmp_path_factory.mktemp(tiny_id))
        return cache[key]

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


def test_a_model_is_found_by_its_hub_repository_or_another_letter_case_and_a_typo_gets_the_closest_ids():
    from depthport.errors import InputError
    from depthport.registry import get_spec

    assert get_spec("depth-anything/Depth-Anything-V2-Small-hf") is MODELS["da2-small"]  # copied from the Hub
    assert get_spec("depth-anything/DA3-SMALL") is MODELS["da3-small"]  # the upstream checkpoint's repository
    assert get_spec("DA2-Large") is MODELS["da2-large"]
    for text, hint in (("da2-smal", "did you mean da2-small or"), ("xingyang1/Distill-Any-Depth", "did you mean "
                       "distill-any-depth-base or distill-any-depth-small?"), ("", ""), ("da2-tiny ", "")):
        with pytest.raises(InputError) as err:  # one repository for two sizes is not a choice made for the user
            get_spec(text)
        assert str(err.value).startswith(f"unknown model {text!r}") and hint in str(err.value)
        assert "supported: da2-small" in str(err.value) and "tiny" not in str(err.value).split("supported:")[1]
        assert "?;" not in str(err.value)  # 'did you mean ...?; supported: ...' read as a slip


@pytest.mark.parametrize("model_id", IDS)
def test_every_id_names_a_registered_tiny_config_of_its_architecture(model_id):
    spec = MODELS[model_id]
    tiny = tiny_spec(spec)
    assert tiny.arch is spec.arch and tiny.config == spec.tiny and tiny.tiny == spec.tiny
    assert tiny is spec or tiny.hidden
    h, w = tiny.default_hw
    assert h % 14 == 0 and w % 14 == 0 and max(h, w) <= 14 * 8, "the tiny shape must stay small"
    # what the tests show for the tiny config holds for the id: same output meaning and position formula
    for name in ("output", "output_space", "output_meaning", "focal_reference", "channel_dim", "pos_formula"):
        assert getattr(tiny, name) == getattr(spec, name), name
    assert (tiny.max_depth is None) == (spec.max_depth is None)


@pytest.mark.parametrize("model_id", PIPELINE_IDS)
def test_tiny_litert_export_runs_and_matches_eager(model_id, tiny_export):
    from depthport.rewrites import default_rewrites

    spec = MODELS[model_id]
    tiny = tiny_spec(spec)
    made = tiny_export(tiny.id)
    assert made.built.spec.model_config == tiny.model_config and made.built.rewrites == default_rewrites()
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


@pytest.mark.parametrize("tiny_id", PIPELINE_TINY_IDS)
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


@pytest.mark.parametrize("tiny_id", PIPELINE_TINY_IDS)
def test_every_accepted_weight_format_loads_back(tiny_id, tiny_export, tmp_path):
    from depthport.build import resolve_weights

    spec = MODELS[tiny_id]
    weights = tiny_export(tiny_id).built.weights
    assert spec.arch.weight_formats
    for fmt in spec.arch.weight_formats:
        path = save_checkpoint(fmt.from_depthport(weights.state), tmp_path / f"ckpt_{fmt.name}{fmt.suffix}")
        loaded = resolve_weights(spec, path)
        assert loaded.format == fmt.name and not loaded.random
        assert loaded.state.keys() == weights.state.keys()
        assert all(torch.equal(loaded.state[k], v) for k, v in weights.state.items())


@pytest.mark.parametrize("model_id", PIPELINE_IDS)
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


BANNED_OPS = ("GATHER", "GATHER_ND", "EMBEDDING_LOOKUP", "BROADCAST_TO", "TRANSPOSE_CONV", "RESIZE_BILINEAR",
              "RESIZE_NEAREST_NEIGHBOR", "SELECT_V2", "SCATTER_ND", "CAST")


@pytest.mark.parametrize("tiny_id", PIPELINE_TINY_IDS)
def test_tiny_export_is_gpu_clean_and_rank4(tiny_id, tiny_export):
    from depthport.core.tflite_graph import graph_summary
    from depthport.check.verdict import check_tflite

    path = tiny_export(tiny_id).path
    verdict, summary = check_tflite(path), graph_summary(path)
    errors = [v for v in verdict.violations if v.severity == "error"]
    assert verdict.gpu_clean and not errors, errors
    assert summary["max_tensor_rank"] <= 4
    assert not set(BANNED_OPS) & set(summary["op_histogram"]), summary["op_histogram"]


@pytest.mark.parametrize("tiny_id", [t for t in PIPELINE_TINY_IDS if MODELS[t].metric])
def test_metric_heads_run_fully_on_the_gpu_accelerator(tiny_id, tiny_export):
    """The heads new to metric depth (sigmoid x max_depth, exp) on the real LiteRT GPU accelerator (SwiftShader)."""
    from depthport.check.verdict import check_tflite
    from helpers import vulkan_or_skip

    vulkan_or_skip()
    runtime = check_tflite(tiny_export(tiny_id).path, run_gpu=True).runtime
    assert runtime.fully_delegated and runtime.rel_l2_vs_cpu <= 1e-4, runtime


@pytest.fixture(scope="module")
def tiny_report(tiny_export, tmp_path_factory):
    """tiny id -> (folder, report): its tiny export copied into a folder of its own, with the report.json and
    README.md that the export's own stages write (check without the FP16 prediction, verify skipped on request)."""
    cache: dict[str, tuple] = {}

    def get(tiny_id: str):
        if tiny_id not in cache:
            cache[tiny_id] = _report(MODELS[tiny_id], tiny_export(tiny_id), tmp_path_factory.mktemp(f"{tiny_id}-out"))
        return cache[tiny_id]

    return get


def _report(spec: ModelSpec, made: TinyExport, folder):
    import shutil

    from depthport.export.context import ExportContext, StageOptions, artifact_entry
    from depthport.pipeline import STAGES, ExportOptions, new_report
    from depthport.core.schema import dumps

    stem = spec.id.replace("-", "_")
    path = folder / f"{stem}_fp32.tflite"
    shutil.copyfile(made.path, path)
    built = dataclasses.replace(made.built, spec=spec)  # the same network, this id
    stages = StageOptions(skip={"ledger", "verify", "bench", "report"}, fp16_sim=False)
    opts = ExportOptions(model=spec.id, weights="random", input_hw=built.input_hw, out_dir=folder,
                         targets=("litert-fp32",), stages=stages)
    ctx = ExportContext(built, folder, stem, options=stages)
    report = new_report(opts, spec, built)
    report["artifacts"].append(artifact_entry(ctx, path, "litert-fp32", precision="fp32"))
    for stage in STAGES:
        if stage.name in ("check", "verify", "card"):
            stage.apply(ctx, report)
    (folder / "report.json").write_text(dumps(report))
    return folder, path


@pytest.mark.parametrize("tiny_id", PIPELINE_TINY_IDS)
def test_output_meaning_reaches_report_and_card(tiny_id, tiny_report):
    from depthport.core.schema import read_report

    spec = MODELS[tiny_id]
    folder, _ = tiny_report(tiny_id)
    report = read_report(folder / "report.json")
    units = spec.units()
    assert report["output"] == spec.output and report["output_space"] == spec.output_space
    assert report["output_units"] == units and units["meaning"] == spec.output_meaning
    assert report["weights_detail"]["licence"] == spec.licence
    card = (folder / "README.md").read_text()
    io = card.split("## Input and output")[1].split("## Variants")[0]
    snippets = card.split("## Use it")[1]
    assert spec.output in io and f"| units | {units['line']} |" in io
    if spec.needs_focal:
        assert units["to_metres"] == "depth_m = value * focal_px / 300" and "value x focal_px / 300" in io
        assert "60° horizontal field of view" in io and " m.\n" in io  # the worked example ends in metres
        assert "depth_m = depth * focal_px / 300" in snippets and "depth[it] * focalPx / 300f" in snippets
    elif spec.metric:
        assert f"from 0 to {spec.max_depth:g} m" in io and "depth_m = depth   # already metres" in snippets
    else:
        assert units["unit"] is None and "focal_px" not in card and "depth_m" not in snippets


@pytest.mark.parametrize("tiny_id", PIPELINE_TINY_IDS)
def test_predict_gives_the_output_in_its_units(tiny_id, tiny_report, tmp_path):
    from depthport import __file__ as package
    from depthport.errors import InputError
    from depthport.predict import model_input, photo_size, predict
    from depthport.preprocess import load_image
    from depthport.quiet import native_stderr_muted
    from depthport.runtimes import load_runner

    spec = MODELS[tiny_id]
    _, model = tiny_report(tiny_id)
    image_path = Path(package).parent / "assets" / "chelsea.jpg"
    image = load_image(image_path)
    focal = 700.0 if spec.needs_focal else None
    with pytest.raises(InputError, match="--focal"):  # required where metres need it, refused elsewhere
        predict(model, image_path, tmp_path / "x.png", focal=None if spec.needs_focal else 700.0)
    with native_stderr_muted():
        depth = predict(model, image_path, tmp_path / "d.png", tmp_path / "d.npy", focal=focal)
        raw = np.asarray(load_runner(model).run(model_input(image, model, spec.default_hw))).reshape(spec.default_hw)
    h, w = spec.default_hw
    factor = focal * (w / image.width + h / image.height) / 2 / 300 if spec.needs_focal else 1.0
    assert depth.shape == (image.height, image.width)  # resized to the photo, values kept (metres stay metres)
    np.testing.assert_allclose(depth, photo_size(raw * np.float32(factor), depth.shape), rtol=1e-5, atol=1e-6)
    assert np.array_equal(np.load(tmp_path / "d.npy"), depth)
    png = Image.open(tmp_path / "d.png")
    assert png.size == image.size  # the .npy's size, a colour-bar legend in metres inside it for metric models
    legend = np.asarray(png.convert("RGB"))[2:png.height // 2, -8:]
    assert bool((legend == 255).all(axis=-1).any()) == spec.metric  # its white panel at the right edge


def test_distill_any_depth_ids_are_depth_anything_v2_checkpoints():
    """Distill-Any-Depth small and base: the DA-V2 architecture at those sizes, relative inverse depth, with the
    release each loads by default and where their licence comes from."""
    small, base = MODELS["distill-any-depth-small"], MODELS["distill-any-depth-base"]
    assert small.arch is MODELS["da2-small"].arch and small.model_config == MODELS["da2-small"].model_config
    assert base.model_config == MODELS["da2-base"].model_config and tiny_spec(base).id == "da2-tiny"
    assert small.hf_repo == "xingyang1/Distill-Any-Depth-Small-hf" and not base.hf_repo
    assert (base.official_repo, base.official_file) == ("xingyang1/Distill-Any-Depth", "base/model.safetensors")
    assert small.output_meaning == base.output_meaning == MODELS["da2-small"].output_meaning
    for spec in (small, base):
        assert spec.licence == "Apache-2.0" and "MIT" in spec.licence_note and not spec.non_commercial
