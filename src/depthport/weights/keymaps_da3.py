"""Depth Anything 3 checkpoints (ByteDance-Seed/Depth-Anything-3, hub repos depth-anything/DA3-*) as key maps.

The hub files store the network under the API wrapper's ``model.`` prefix. Q/K/V are thirds of one fused
``qkv``. The camera encoder/decoder and the auxiliary (ray) branch of the head are not part of the depth
path: their keys are accepted and ignored; any other difference is a `CheckpointMismatch`.
"""

from __future__ import annotations

from .formats import KeyMapFormat

_VIT = "backbone.pretrained"

RULES = [
    (r"encoder\.patch_embed\.(weight|bias)", rf"{_VIT}.patch_embed.proj.\1"),
    (r"encoder\.(cls_token|camera_token|pos_embed)", rf"{_VIT}.\1"),
    (r"encoder\.blocks\.(\d+)\.norm(1|2)\.(weight|bias)", rf"{_VIT}.blocks.\1.norm\2.\3"),
    (r"encoder\.blocks\.(\d+)\.attn\.(q_norm|k_norm|proj)\.(weight|bias)", rf"{_VIT}.blocks.\1.attn.\2.\3"),
    (r"encoder\.blocks\.(\d+)\.ls(1|2)\.gamma", rf"{_VIT}.blocks.\1.ls\2.gamma"),
    (r"encoder\.blocks\.(\d+)\.mlp\.(fc1|fc2)\.(weight|bias)", rf"{_VIT}.blocks.\1.mlp.\2.\3"),
    (r"encoder\.norm\.(weight|bias)", rf"{_VIT}.norm.\1"),
    (r"head\.norm\.(weight|bias)", r"head.norm.\1"),
    (r"head\.projects\.(\d)\.(weight|bias)", r"head.projects.\1.\2"),
    (r"head\.resize\.(\d)\.(weight|bias)", r"head.resize_layers.\1.\2"),
    (r"head\.layer_rn\.(\d)\.weight", lambda m: f"head.scratch.layer{int(m.group(1)) + 1}_rn.weight"),
    (r"head\.fusion\.(\d)\.res(1|2)\.conv(1|2)\.(weight|bias)",
     lambda m: f"head.scratch.refinenet{4 - int(m.group(1))}.resConfUnit{m.group(2)}.conv{m.group(3)}.{m.group(4)}"),
    (r"head\.fusion\.(\d)\.out_conv\.(weight|bias)",
     lambda m: f"head.scratch.refinenet{4 - int(m.group(1))}.out_conv.{m.group(2)}"),
    (r"head\.out_conv1\.(weight|bias)", r"head.scratch.output_conv1.\1"),
    (r"head\.out_conv2\.(weight|bias)", r"head.scratch.output_conv2.0.\1"),
    (r"head\.out_conv3\.(weight|bias)", r"head.scratch.output_conv2.2.\1"),
]
FUSED = [(r"encoder\.blocks\.(\d+)\.attn\.(q|k|v)\.(weight|bias)", rf"{_VIT}.blocks.\1.attn.qkv.\3")]
IGNORED = [
    r"cam_enc\..*",
    r"cam_dec\..*",
    r"head\.scratch\.(refinenet\d_aux|output_conv1_aux|output_conv2_aux)\..*",
]

OFFICIAL_DA3 = KeyMapFormat("official-da3", RULES, fused=FUSED, ignored=IGNORED, prefix="model.")

# DA3Metric-Large and DA3Mono-Large (hub repos depth-anything/DA3METRIC-LARGE, DA3MONO-LARGE): the same names, no
# camera parts; the head's sky branch is outside the depth path (`models.depth_anything_v3_mono`) and ignored.
OFFICIAL_DA3_MONO = KeyMapFormat("official-da3-mono", RULES, fused=FUSED, prefix="model.",
                                 ignored=[r"head\.scratch\.sky_output_conv2\.(0|2)\.(weight|bias)"])
