"""Official `.pth` checkpoints are verified against the official Depth Anything V2 computation.

The official repository's `depth_anything_v2/dpt.py` imports OpenCV and torchvision at module level and no
torchvision wheel imports beside the CPU torch build, so the reference for these checkpoints is transformers'
network with the official DINOv2 position-embedding resampling, `scale_factor=(n + 0.1) / sqrt(N)`, on that one
instance (see `depthport.reference.OfficialResamplingReference`).
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from depthport.build import build, resolve_weights
from depthport.models.depth_anything_v2 import CONFIGS
from depthport.reference import OfficialResamplingReference, TransformersReference, reference_model
from depthport.registry import get_spec
from depthport.verify.stage import reference_label
from depthport.weights.formats import OFFICIAL

from helpers import image_batch, rel_l2, shipped

OFF_SQUARE = (70, 98)  # 5x7 patches: the two resampling formulas differ here


def official_layout(config: str) -> set[str]:
    """The keys of the official `DepthAnythingV2(...).state_dict()` for one of our configs.

    Written out from the official code's modules (DINOv2 with LayerScale and a fused qkv, no registers; DPTHead
    without class-token readout; four FeatureFusionBlocks, each with two ResidualConvUnits). For the small config
    this is the official model's 239 keys.
    """
    depth = CONFIGS[config].vit.depth
    keys = {f"pretrained.{k}" for k in ("cls_token", "pos_embed", "mask_token", "patch_embed.proj.weight",
                                         "patch_embed.proj.bias", "norm.weight", "norm.bias")}
    for n in range(depth):
        for part in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"):
            keys |= {f"pretrained.blocks.{n}.{part}.weight", f"pretrained.blocks.{n}.{part}.bias"}
        keys |= {f"pretrained.blocks.{n}.ls1.gamma", f"pretrained.blocks.{n}.ls2.gamma"}
    for i in range(4):
        keys |= {f"depth_head.projects.{i}.{p}" for p in ("weight", "bias")}
        keys |= {f"depth_head.resize_layers.{i}.{p}" for p in ("weight", "bias") if i != 2}  # 2 is Identity
        keys.add(f"depth_head.scratch.layer{i + 1}_rn.weight")
        refine = f"depth_head.scratch.refinenet{i + 1}"
        keys |= {f"{refine}.out_conv.{p}" for p in ("weight", "bias")}
        keys |= {f"{refine}.resConfUnit{u}.conv{c}.{p}" for u in (1, 2) for c in (1, 2) for p in ("weight", "bias")}
    keys |= {f"depth_head.scratch.{m}.{p}" for m in ("output_conv1", "output_conv2.0", "output_conv2.2")
             for p in ("weight", "bias")}
    return keys


def official_state(weights) -> dict[str, torch.Tensor]:
    """An official-format state dict, as the released `.pth` files hold it (the MAE mask token included)."""
    state = OFFICIAL.from_depthport(weights.state)
    state["pretrained.mask_token"] = torch.zeros(1, weights.state["encoder.cls_token"].shape[-1])
    return state


def transformers_name(key: str) -> list[tuple[str, int | None]]:
    """transformers' module names for one official key (and which third of a fused qkv), written from
    transformers' convert_depth_anything_to_hf.py, independently of depthport's key maps."""
    rules = [
        (r"pretrained\.cls_token", "backbone.embeddings.cls_token"),
        (r"pretrained\.pos_embed", "backbone.embeddings.position_embeddings"),
        (r"pretrained\.patch_embed\.proj\.(\w+)", r"backbone.embeddings.patch_embeddings.projection.\1"),
        (r"pretrained\.norm\.(\w+)", r"backbone.layernorm.\1"),
        (r"pretrained\.blocks\.(\d+)\.(norm1|norm2|mlp\.fc1|mlp\.fc2)\.(\w+)", r"backbone.encoder.layer.\1.\2.\3"),
        (r"pretrained\.blocks\.(\d+)\.attn\.proj\.(\w+)", r"backbone.encoder.layer.\1.attention.o_proj.\2"),
        (r"pretrained\.blocks\.(\d+)\.ls(1|2)\.gamma", r"backbone.encoder.layer.\1.layer_scale\2.lambda1"),
        (r"depth_head\.projects\.(\d)\.(\w+)", r"neck.reassemble_stage.layers.\1.projection.\2"),
        (r"depth_head\.resize_layers\.(\d)\.(\w+)", r"neck.reassemble_stage.layers.\1.resize.\2"),
        (r"depth_head\.scratch\.output_conv1\.(\w+)", r"head.conv1.\1"),
        (r"depth_head\.scratch\.output_conv2\.0\.(\w+)", r"head.conv2.\1"),
        (r"depth_head\.scratch\.output_conv2\.2\.(\w+)", r"head.conv3.\1"),
    ]
    for pattern, template in rules:
        if m := re.fullmatch(pattern, key):
            return [(m.expand(template), None)]
    if m := re.fullmatch(r"pretrained\.blocks\.(\d+)\.attn\.qkv\.(\w+)", key):
        return [(f"backbone.encoder.layer.{m[1]}.attention.{p}_proj.{m[2]}", i) for i, p in enumerate("qkv")]
    if m := re.fullmatch(r"depth_head\.scratch\.layer(\d)_rn\.weight", key):
        return [(f"neck.convs.{int(m[1]) - 1}.weight", None)]
    if m := re.fullmatch(r"depth_head\.scratch\.refinenet(\d)\.(.+)\.(\w+)", key):
        layer = f"neck.fusion_stage.layers.{4 - int(m[1])}"  # refinenet4 fuses the deepest map first
        part = re.sub(r"resConfUnit(\d)\.conv(\d)", r"residual_layer\1.convolution\2", m[2]).replace("out_conv",
                                                                                                     "projection")
        return [(f"{layer}.{part}.{m[3]}", None)]
    raise KeyError(key)


@pytest.fixture(scope="module")
def official_pth(tiny_weights, tmp_path_factory):
    path = tmp_path_factory.mktemp("official-ref") / "depth_anything_v2_vitt.pth"
    torch.save(official_state(tiny_weights), path)
    return path


@pytest.fixture(scope="module")
def official_weights(tiny_spec, official_pth):
    return resolve_weights(tiny_spec, str(official_pth))


@pytest.fixture(scope="module")
def official_reference(tiny_spec, official_weights):
    return reference_model(tiny_spec, official_weights)


# (a) the official key layout, key for key, through the reference's loading


@pytest.mark.parametrize("model_id", ["da2-tiny", "da2-small"])
def test_official_checkpoint_loads_key_for_key_into_the_reference(model_id, tmp_path):
    spec = get_spec(model_id)
    weights = resolve_weights(spec, "random")
    state = official_state(weights)
    assert set(state) == official_layout(spec.config)
    if model_id == "da2-small":
        assert len(state) == 239
        assert state["pretrained.pos_embed"].shape == (1, 1370, 384)
        assert state["pretrained.blocks.11.attn.qkv.weight"].shape == (1152, 384)
        assert state["depth_head.resize_layers.0.weight"].shape == (48, 48, 4, 4)  # ConvTranspose2d: (in, out, k, k)
        assert state["depth_head.resize_layers.3.weight"].shape == (384, 384, 3, 3)
        assert state["depth_head.scratch.output_conv2.0.weight"].shape == (32, 32, 3, 3)
    path = tmp_path / "ckpt.pth"
    torch.save(state, path)
    loaded = resolve_weights(spec, str(path))
    assert loaded.format == "official"
    reference = reference_model(spec, loaded)
    assert type(reference) is OfficialResamplingReference
    theirs = reference.model.state_dict()
    covered = set()
    for key, tensor in state.items():
        if key == "pretrained.mask_token":  # the MAE token: not on the depth path, not loaded
            continue
        for name, third in transformers_name(key):
            expected = tensor if third is None else tensor.chunk(3, dim=0)[third]
            assert torch.equal(theirs[name], expected), f"{key} -> {name}"
            covered.add(name)
    assert set(theirs) - covered == {"backbone.embeddings.mask_token"}


# (b) depthport's eager export-form model against the official computation, off the square pretraining grid


def test_eager_export_form_matches_the_official_reference_off_square(tiny_spec, official_weights,
                                                                     official_reference):
    built = build(tiny_spec, OFF_SQUARE, official_weights)
    assert built.pos_formula == "official"
    x = image_batch(OFF_SQUARE)
    with torch.no_grad():
        ours, ref = built.model(x), official_reference(x)
        plain = TransformersReference(tiny_spec, official_weights)(x)
    assert ours.shape == ref.shape == (1, *OFF_SQUARE)
    assert rel_l2(ours, ref) <= 1e-5
    assert rel_l2(plain, ref) > 1e-3  # transformers' own resampling is a different model here


def test_both_references_agree_on_the_pretraining_grid(tiny_spec, official_weights, official_reference):
    hw = (56, 56)  # the tiny config's 4x4 grid: neither upstream resamples
    x = image_batch(hw)
    with torch.no_grad():
        assert rel_l2(official_reference(x), TransformersReference(tiny_spec, official_weights)(x)) <= 1e-6


def test_reference_is_chosen_by_the_weights_format(tiny_spec, tiny_weights, tiny_reference, official_weights,
                                                   official_reference):
    from transformers.models.dinov2.modeling_dinov2 import Dinov2Embeddings

    assert tiny_weights.format == "random" and type(tiny_reference) is TransformersReference
    assert type(official_reference) is OfficialResamplingReference
    # the official resampling is on that one instance only: transformers itself is left as it is
    assert type(tiny_reference.model.backbone.embeddings) is Dinov2Embeddings
    assert type(TransformersReference(tiny_spec, official_weights).model.backbone.embeddings) is Dinov2Embeddings
    assert isinstance(official_reference.model.backbone.embeddings, Dinov2Embeddings)
    label = reference_label(official_reference, official_weights)
    assert "Depth-Anything-V2's official pos-embed resampling" in label and "(n+0.1)/37" in label
    assert label.endswith(f"weights {official_weights.source}")
    assert reference_label(tiny_reference, tiny_weights).startswith("transformers' DepthAnythingForDepthEstimation (")

    class Package:  # as the DA3 reference's doc begins: read inside the card's sentence ('Parity is against The ...')
        """The `depth-anything-3` package's DepthAnything3Net; returns depth."""

    assert reference_label(Package(), tiny_weights).startswith("the `depth-anything-3` package's DepthAnything3Net (")


def test_fp64_reference_resamples_like_the_official_code(tiny_spec, official_weights):
    """The official code resamples the float32 grid and casts to the tokens' dtype, in float64 too."""
    reference = OfficialResamplingReference(tiny_spec, official_weights).double()
    x = image_batch(OFF_SQUARE).double()
    with torch.no_grad():
        out = reference(x)
    assert out.dtype == torch.float64
    built = build(tiny_spec, OFF_SQUARE, official_weights)
    assert rel_l2(built.model(x.float()).detach(), out) <= 1e-5


# (c) end to end: an official `.pth` exported and verified against the official computation


def test_export_from_official_pth_passes_the_fp32_gate(official_pth, tmp_path):
    from depthport.export.context import StageOptions
    from depthport.pipeline import ExportOptions, run_export

    out = tmp_path / "out"
    req = ExportOptions(model="da2-tiny", weights=str(official_pth), input_hw=OFF_SQUARE, out_dir=out,
                        targets=("litert-fp32",), stages=StageOptions(skip={"ledger", "bench", "report", "card"}))
    report = run_export(req)
    assert report["pos_embed_formula"] == "official" and report["weights_detail"]["format"] == "official"
    assert "Depth-Anything-V2's official pos-embed resampling" in report["verify"]["reference"]
    assert str(official_pth) in report["verify"]["reference"]
    [art] = report["artifacts"]
    assert art["target"] == "litert-fp32" and art["checks"]["parity"]["passed"] is True and shipped(art) is True
    assert art["parity"]["rel_l2_pooled"] <= 1e-5
    assert json.loads((out / "report.json").read_text())["verify"]["reference"] == report["verify"]["reference"]
