"""Upstream reference implementations loaded with the same weights, for equivalence and parity checks."""

from __future__ import annotations

import torch
from torch import nn

from .models.depth_anything_v2 import CONFIGS
from .registry import ModelSpec
from .weights import LoadedWeights
from .weights.formats import TRANSFORMERS


def transformers_config(spec: ModelSpec):
    """The transformers DepthAnythingConfig for one of our Depth Anything V2 sizes."""
    from transformers import DepthAnythingConfig, Dinov2Config

    cfg = CONFIGS[spec.config]
    vit, dpt = cfg.vit, cfg.dpt
    backbone = Dinov2Config(
        hidden_size=vit.dim, num_hidden_layers=vit.depth, num_attention_heads=vit.heads, mlp_ratio=int(vit.mlp_ratio),
        patch_size=vit.patch, image_size=vit.patch * vit.pretrain_grid, layerscale_value=1.0,
        out_indices=[i + 1 for i in cfg.layers], apply_layernorm=True, reshape_hidden_states=False,
    )
    return DepthAnythingConfig(
        backbone_config=backbone, patch_size=vit.patch, reassemble_hidden_size=vit.dim,
        neck_hidden_sizes=list(dpt.out_channels), fusion_hidden_size=dpt.features, head_hidden_size=dpt.head_hidden,
        depth_estimation_type="relative",
    )


class TransformersReference(nn.Module):
    """transformers' DepthAnythingForDepthEstimation; returns predicted_depth (B, H, W)."""

    def __init__(self, spec: ModelSpec, weights: LoadedWeights):
        super().__init__()
        from transformers import DepthAnythingForDepthEstimation

        self.model = DepthAnythingForDepthEstimation(transformers_config(spec)).eval()
        state = TRANSFORMERS.from_depthport(weights.state)
        state = {_v5_name(k): v for k, v in state.items()}
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith("mask_token")]
        if missing or unexpected:
            raise RuntimeError(f"reference load failed: missing {missing[:5]}, unexpected {unexpected[:5]}")

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=x).predicted_depth


def _v5_name(key: str) -> str:
    """Hub-file names -> the module names of transformers >= 5 (which renames only when loading files)."""
    return (key.replace(".attention.attention.query.", ".attention.q_proj.")
               .replace(".attention.attention.key.", ".attention.k_proj.")
               .replace(".attention.attention.value.", ".attention.v_proj.")
               .replace(".attention.output.dense.", ".attention.o_proj."))


def reference_model(spec: ModelSpec, weights: LoadedWeights) -> nn.Module:
    if spec.family == "depth-anything-v2":
        return TransformersReference(spec, weights)
    raise ValueError(f"no reference implementation for {spec.family}")
