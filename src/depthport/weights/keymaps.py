"""Key maps between depthport's parameter names and each upstream checkpoint format, as data.

Each rule is (depthport pattern, upstream template); ``{n}`` is a layer index. Keys in ``IGNORED`` exist
upstream but have no counterpart in the depth path (the MAE mask token).
"""

from __future__ import annotations

import re

# transformers `DepthAnythingForDepthEstimation`, as the hub files of depth-anything/Depth-Anything-V2-*-hf store it.
TRANSFORMERS_DA2 = [
    (r"encoder\.patch_embed\.(weight|bias)", r"backbone.embeddings.patch_embeddings.projection.\1"),
    (r"encoder\.cls_token", r"backbone.embeddings.cls_token"),
    (r"encoder\.pos_embed", r"backbone.embeddings.position_embeddings"),
    (r"encoder\.blocks\.(\d+)\.norm(1|2)\.(weight|bias)", r"backbone.encoder.layer.\1.norm\2.\3"),
    (r"encoder\.blocks\.(\d+)\.attn\.q\.(weight|bias)", r"backbone.encoder.layer.\1.attention.attention.query.\2"),
    (r"encoder\.blocks\.(\d+)\.attn\.k\.(weight|bias)", r"backbone.encoder.layer.\1.attention.attention.key.\2"),
    (r"encoder\.blocks\.(\d+)\.attn\.v\.(weight|bias)", r"backbone.encoder.layer.\1.attention.attention.value.\2"),
    (r"encoder\.blocks\.(\d+)\.attn\.proj\.(weight|bias)", r"backbone.encoder.layer.\1.attention.output.dense.\2"),
    (r"encoder\.blocks\.(\d+)\.ls(1|2)\.gamma", r"backbone.encoder.layer.\1.layer_scale\2.lambda1"),
    (r"encoder\.blocks\.(\d+)\.mlp\.(fc1|fc2)\.(weight|bias)", r"backbone.encoder.layer.\1.mlp.\2.\3"),
    (r"encoder\.norm\.(weight|bias)", r"backbone.layernorm.\1"),
    (r"head\.projects\.(\d)\.(weight|bias)", r"neck.reassemble_stage.layers.\1.projection.\2"),
    (r"head\.resize\.(\d)\.(weight|bias)", r"neck.reassemble_stage.layers.\1.resize.\2"),
    (r"head\.layer_rn\.(\d)\.weight", r"neck.convs.\1.weight"),
    (r"head\.fusion\.(\d)\.res(1|2)\.conv(1|2)\.(weight|bias)",
     r"neck.fusion_stage.layers.\1.residual_layer\2.convolution\3.\4"),
    (r"head\.fusion\.(\d)\.out_conv\.(weight|bias)", r"neck.fusion_stage.layers.\1.projection.\2"),
    (r"head\.out_conv(1|2|3)\.(weight|bias)", r"head.conv\1.\2"),
]
# transformers `PromptDepthAnythingForDepthEstimation` (depth-anything/prompt-depth-anything-*-hf): Depth Anything V2's
# names plus a prompt branch in each fusion block.
TRANSFORMERS_PROMPT_DA = [
    *TRANSFORMERS_DA2,
    (r"head\.fusion\.(\d)\.prompt\.conv(1|2|3)\.(weight|bias)",
     r"neck.fusion_stage.layers.\1.prompt_depth_layer.convolution\2.\3"),
]
# transformers >= 5 renames the attention projections when it loads; its own saves use these names.
TRANSFORMERS_ALIASES = [
    (r"\.attention\.q_proj\.", ".attention.attention.query."),
    (r"\.attention\.k_proj\.", ".attention.attention.key."),
    (r"\.attention\.v_proj\.", ".attention.attention.value."),
    (r"\.attention\.o_proj\.", ".attention.output.dense."),
]
TRANSFORMERS_IGNORED = [r"backbone\.embeddings\.mask_token"]


def _refinenet(match: re.Match) -> str:
    return f"depth_head.scratch.refinenet{4 - int(match.group(1))}.resConfUnit{match.group(2)}.conv{match.group(3)}.{match.group(4)}"


# The official DepthAnything/Depth-Anything-V2 `.pth` state dicts. Q/K/V are thirds of one fused `qkv`.
OFFICIAL_DA2 = [
    (r"encoder\.patch_embed\.(weight|bias)", r"pretrained.patch_embed.proj.\1"),
    (r"encoder\.cls_token", r"pretrained.cls_token"),
    (r"encoder\.pos_embed", r"pretrained.pos_embed"),
    (r"encoder\.blocks\.(\d+)\.norm(1|2)\.(weight|bias)", r"pretrained.blocks.\1.norm\2.\3"),
    (r"encoder\.blocks\.(\d+)\.attn\.proj\.(weight|bias)", r"pretrained.blocks.\1.attn.proj.\2"),
    (r"encoder\.blocks\.(\d+)\.ls(1|2)\.gamma", r"pretrained.blocks.\1.ls\2.gamma"),
    (r"encoder\.blocks\.(\d+)\.mlp\.(fc1|fc2)\.(weight|bias)", r"pretrained.blocks.\1.mlp.\2.\3"),
    (r"encoder\.norm\.(weight|bias)", r"pretrained.norm.\1"),
    (r"head\.projects\.(\d)\.(weight|bias)", r"depth_head.projects.\1.\2"),
    (r"head\.resize\.(\d)\.(weight|bias)", r"depth_head.resize_layers.\1.\2"),
    (r"head\.layer_rn\.(\d)\.weight", lambda m: f"depth_head.scratch.layer{int(m.group(1)) + 1}_rn.weight"),
    (r"head\.fusion\.(\d)\.res(1|2)\.conv(1|2)\.(weight|bias)", _refinenet),
    (r"head\.fusion\.(\d)\.out_conv\.(weight|bias)",
     lambda m: f"depth_head.scratch.refinenet{4 - int(m.group(1))}.out_conv.{m.group(2)}"),
    (r"head\.out_conv1\.(weight|bias)", r"depth_head.scratch.output_conv1.\1"),
    (r"head\.out_conv2\.(weight|bias)", r"depth_head.scratch.output_conv2.0.\1"),
    (r"head\.out_conv3\.(weight|bias)", r"depth_head.scratch.output_conv2.2.\1"),
]
# depthport key pattern -> (fused upstream template, which third).
OFFICIAL_DA2_FUSED = [
    (r"encoder\.blocks\.(\d+)\.attn\.(q|k|v)\.(weight|bias)", r"pretrained.blocks.\1.attn.qkv.\3"),
]
OFFICIAL_IGNORED = [r"pretrained\.mask_token"]
QKV_PART = {"q": 0, "k": 1, "v": 2}


def upstream_name(key: str, rules) -> str | None:
    """The upstream name of a depthport key under ``rules``, or None if no rule covers it."""
    for pattern, template in rules:
        m = re.fullmatch(pattern, key)
        if m:
            return template(m) if callable(template) else m.expand(template)
    return None
