"""Depth Anything 3 at toy size (da3-tiny): equivalence with the official package, checkpoint loading,
constant RoPE, the official resize, and a LiteRT export that is GPU-clean and rank <= 4."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from depthport.build import build, resolve_weights
from depthport.preprocess import da3_resize, da3_size
from depthport.registry import get_spec
from depthport.weights import CheckpointMismatch
from depthport.weights.keymaps_da3 import OFFICIAL_DA3
from helpers import import_or_skip, save_checkpoint

SPEC = get_spec("da3-tiny")
HW = (70, 42)  # a 5x3 patch grid: the 4x4 position grid is resampled, RoPE positions are not square
BANNED = ("GATHER", "GATHER_ND", "EMBEDDING_LOOKUP", "BROADCAST_TO", "TRANSPOSE_CONV", "RESIZE_BILINEAR",
          "SELECT_V2", "SCATTER_ND")


def rel_l2(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def image(hw=HW, seed=0) -> torch.Tensor:
    return torch.randn(1, 3, *hw, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def weights():
    return resolve_weights(SPEC, "random")


@pytest.fixture(scope="module")
def official(weights):
    import_or_skip("depth_anything_3.cfg")
    from depthport.reference import reference_model

    return reference_model(SPEC, weights)


@pytest.mark.parametrize("hw", [HW, (56, 56)], ids=["70x42", "pretrain-grid"])
@pytest.mark.parametrize("rewrites", [[], None], ids=["reference-form", "export-form"])
@torch.no_grad()
def test_matches_official_package(weights, official, rewrites, hw):
    model = build(SPEC, hw, weights, rewrites=rewrites).model
    x = image(hw)
    ours, theirs = model(x), official(x)
    assert ours.shape == theirs.shape == (1, 1, *hw)
    assert rel_l2(ours, theirs) <= 1e-5


@torch.no_grad()
def test_confidence_output_matches_official(weights, official):
    depth, conf = build(SPEC, HW, weights, confidence=True).model(image())
    out = official.model(image()[:, None])
    assert rel_l2(depth, out.depth) <= 1e-5
    assert rel_l2(conf, out.depth_conf) <= 1e-5
    assert float(conf.min()) >= 1.0


@torch.no_grad()
def test_random_weights_give_a_spread_depth(weights):
    depth = build(SPEC, HW, weights).model(image())
    assert torch.isfinite(depth).all() and float(depth.min()) > 0
    assert 0.1 < float(depth.std() / depth.mean()) < 2.0


def test_rope_matches_official_positions_and_rotation():
    import_or_skip("depth_anything_3.cfg")
    from depth_anything_3.model.dinov2.layers.rope import PositionGetter, RotaryPositionEmbedding2D

    from depthport.models.rope import RopeTables, token_positions

    grid, heads, head_dim = (5, 3), 2, 16
    patches = PositionGetter()(1, *grid, device="cpu") + 1  # the upstream's _prepare_rope, one view
    upstream = {False: torch.cat([torch.zeros(1, 1, 2, dtype=patches.dtype), patches], dim=1),
                True: torch.cat([torch.zeros(1, 1, 2, dtype=patches.dtype), torch.ones_like(patches)], dim=1)}
    t = torch.randn(1, heads, 1 + grid[0] * grid[1], head_dim)
    for same, pos in upstream.items():
        assert torch.equal(token_positions(grid, same), pos[0])
        expected = RotaryPositionEmbedding2D(frequency=100)(t, pos)[0]
        tables = RopeTables(token_positions(grid, same), head_dim)
        assert torch.equal(tables(t[0]), expected)
        torch.testing.assert_close(tables.by_matmul(t[0]), expected, rtol=0, atol=1e-6)


UPSTREAM_ONLY = {  # camera encoder/decoder and the auxiliary ray branch: accepted and ignored
    "model.cam_enc.trunk.0.attn.qkv.weight": torch.zeros(6, 2),
    "model.cam_dec.fc_t.bias": torch.zeros(3),
    "model.head.scratch.refinenet2_aux.out_conv.weight": torch.zeros(1),
    "model.head.scratch.output_conv1_aux.3.4.bias": torch.zeros(1),
    "model.head.scratch.output_conv2_aux.0.2.weight": torch.zeros(1),
}


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
@torch.no_grad()
def test_loads_official_checkpoint(weights, tmp_path, suffix):
    state = OFFICIAL_DA3.from_depthport(weights.state)
    assert all(k.startswith("model.") for k in state) and any(".attn.qkv." in k for k in state)
    built = build(SPEC, HW, save_checkpoint({**state, **UPSTREAM_ONLY}, tmp_path / f"da3{suffix}"), rewrites=[])
    assert not built.weights.random and built.weights.format == OFFICIAL_DA3.name
    assert built.weights.state.keys() == weights.state.keys()
    assert all(torch.equal(built.weights.state[k], v) for k, v in weights.state.items())
    reference = build(SPEC, HW, weights, rewrites=[]).model
    assert torch.equal(built.model(image()), reference(image()))


@pytest.mark.parametrize("change, named", [
    ("unexpected", "backbone.pretrained.mask_token"),
    ("missing", "head.scratch.output_conv2.2.weight"),
    ("misshapen", "head.projects.1.bias"),
])
def test_checkpoint_mismatch_names_the_key(weights, tmp_path, change, named):
    state = OFFICIAL_DA3.from_depthport(weights.state)
    if change == "unexpected":
        state["model." + named] = torch.zeros(1, 32)
    elif change == "missing":
        del state["model." + named]
    else:
        state["model." + named] = torch.zeros(3)
    with pytest.raises(CheckpointMismatch, match=named.replace(".", r"\.")) as err:
        build(SPEC, HW, save_checkpoint(state, tmp_path / "bad.safetensors"))
    assert named in getattr(err.value, change)[0]


@pytest.mark.parametrize("image_hw, long_side, expected", [
    ((1080, 1920), 504, (280, 504)),   # 283.5 -> 284 -> nearer multiple 280
    ((1920, 1080), 896, (896, 504)),   # the published portrait shape
    ((300, 451), 504, (336, 504)),     # enlarged
    ((100, 60), 896, (896, 532)),
    ((504, 287), 504, (504, 294)),     # no first resize; a tie rounds up
])
def test_official_resize_size(image_hw, long_side, expected):
    assert da3_size(image_hw, long_side) == expected
    img = Image.new("RGB", (image_hw[1], image_hw[0]))
    assert da3_resize(img, long_side).size == (expected[1], expected[0])


def test_official_resize_shrinks_by_area_average():
    pixels = np.random.default_rng(0).integers(0, 256, (112, 56, 3), dtype=np.uint8)
    out = np.asarray(da3_resize(Image.fromarray(pixels), 56), np.float64)
    blocks = pixels.reshape(56, 2, 28, 2, 3).mean(axis=(1, 3))
    assert out.shape == (56, 28, 3) and np.abs(out - blocks).max() <= 1.0


@pytest.fixture(scope="module")
def tflite(weights, tmp_path_factory):
    from depthport.export.litert import export_tflite
    from depthport.quiet import native_stderr_muted

    built = build(SPEC, HW, weights)
    with native_stderr_muted():
        path = export_tflite(built.model, HW, tmp_path_factory.mktemp("da3") / "da3_tiny_fp32.tflite")
    return built, path


def test_export_is_gpu_clean_rank4_without_lookups(tflite):
    from depthport.core.tflite_graph import graph_summary
    from depthport.check.verdict import check_tflite

    _, path = tflite
    verdict, summary = check_tflite(path), graph_summary(path)
    errors = [v for v in verdict.violations if v.severity == "error"]
    assert verdict.gpu_clean and not errors, errors
    assert summary["max_tensor_rank"] <= 4
    assert not set(BANNED) & set(summary["op_histogram"]), summary["op_histogram"]


def test_export_runs_like_eager(tflite):
    from depthport.quiet import native_stderr_muted
    from depthport.runtimes import load_runner

    built, path = tflite
    x = image(seed=3)
    with native_stderr_muted():
        out = np.asarray(load_runner(path).run(x.numpy()))
    with torch.no_grad():
        eager = built.model(x).numpy()
    assert out.shape == (1, 1, *HW)
    assert rel_l2(out, eager) <= 1e-5


def test_head_position_embedding_is_the_official_one():
    import_or_skip("depth_anything_3.cfg")
    from depth_anything_3.model.utils.head_utils import create_uv_grid, position_grid_to_embed

    from depthport.models.dualdpt import PosEmbed2D

    for channels, hw, image_hw in [(48, (64, 36), (896, 504)), (32, (896, 504), (896, 504)), (8, (5, 3), (70, 42))]:
        uv = create_uv_grid(hw[1], hw[0], aspect_ratio=image_hw[1] / image_hw[0], dtype=torch.float32)
        expected = (position_grid_to_embed(uv, channels) * 0.1).permute(2, 0, 1)[None]
        assert torch.equal(PosEmbed2D(channels, hw, image_hw, 0.1, 100.0).full(), expected)


def test_predict_gives_a_da3_file_the_official_resize(tflite, tmp_path):
    """`predict` reads the export's report: a DA3 file gets DA3's area/cubic resize, not a bicubic stretch."""
    import json

    from depthport.predict import predict
    from depthport.preprocess import da3_input, da3_tensor, to_tensor
    from depthport.quiet import native_stderr_muted
    from depthport.runtimes import load_runner

    _, path = tflite
    pixels = np.random.default_rng(1).integers(0, 256, (500, 300, 3), dtype=np.uint8)
    img = Image.fromarray(pixels)
    assert np.array_equal(da3_input(img, HW), da3_tensor(img, max(HW)))
    assert not np.allclose(da3_input(img, HW), to_tensor(img, HW))
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / path.name).write_bytes(path.read_bytes())
    (folder / "report.json").write_text(json.dumps({"model": "da3-tiny"}))
    img.save(tmp_path / "img.png")
    with native_stderr_muted():
        depth = predict(folder / path.name, tmp_path / "img.png", tmp_path / "d.png", model_size=True)
        expected = np.asarray(load_runner(path).run(da3_input(img, HW))).reshape(HW)
    assert np.array_equal(depth, expected)


def test_split_form_keeps_the_depth_channel_alone_and_shortens_fp16_accumulation(weights):
    """xnnpack-fp16-split on DA3: the head's last convolution becomes its depth channel alone (``depth_only``); the
    head is kept in FP32 unsplit (``export.fp32_head``), and without that the depth channel is split like the others;
    the form equals the plain fp16 form in FP32 and predicts a smaller XNNPACK FP16 error."""
    from torch import nn

    from depthport.check.fp16_compute import xnnpack_fp16_form
    from depthport.export.executorch import FORMS, backend_form
    from depthport.export.fp32_head import Fp32Entry
    from depthport.export.split_k import SplitConv2d
    from depthport.fp16 import simulate_fp16

    built = build(SPEC, HW, weights)
    assert built.model.head.out_conv3.out_channels == 2  # depth and confidence, as upstream stores it
    plain, split = xnnpack_fp16_form(built.model), xnnpack_fp16_form(built.model, target="xnnpack-fp16-split")
    assert isinstance(split.head, Fp32Entry)
    kept = split.head.module.out_conv3
    assert type(kept) is nn.Conv2d and kept.out_channels == 1
    unheaded = backend_form(built.model, **{**FORMS["xnnpack-fp16-split"], "fp16_io": False, "fp32_head": False})[0]
    last = unheaded.head.out_conv3
    assert isinstance(last, SplitConv2d) and last.cout == 1 and last.groups == last.weight.shape[0]
    x = image()
    with torch.no_grad():
        assert rel_l2(split(x), plain(x)) < 1e-6
    errors = [simulate_fp16(m, x, accumulate="xnnpack").rel_l2 for m in (plain, split)]
    assert errors[1] < 0.8 * errors[0]
