"""Upstream reference implementations loaded with the same weights, for equivalence and parity checks."""

from __future__ import annotations

import math
import re
from importlib.metadata import version

import torch
from torch import nn

from .spec import ModelSpec
from .weights import LoadedWeights
from .weights.formats import TRANSFORMERS


def transformers_config(spec: ModelSpec, config_class=None):
    """The transformers DepthAnythingConfig (or ``config_class``, which takes the same fields) for one of our
    Depth Anything V2 sizes, relative (ReLU head) or metric (sigmoid x max_depth)."""
    from transformers import DepthAnythingConfig, Dinov2Config

    cfg = spec.model_config
    vit, dpt = cfg.vit, cfg.dpt
    backbone = Dinov2Config(
        hidden_size=vit.dim, num_hidden_layers=vit.depth, num_attention_heads=vit.heads, mlp_ratio=int(vit.mlp_ratio),
        patch_size=vit.patch, image_size=vit.pretrain_hw[0], layerscale_value=1.0,
        out_indices=[i + 1 for i in cfg.layers], apply_layernorm=True, reshape_hidden_states=False,
    )
    return (config_class or DepthAnythingConfig)(
        backbone_config=backbone, patch_size=vit.patch, reassemble_hidden_size=vit.dim,
        neck_hidden_sizes=list(dpt.out_channels), fusion_hidden_size=dpt.features, head_hidden_size=dpt.head_hidden,
        depth_estimation_type="relative" if dpt.activation == "relu" else "metric",
        **({"max_depth": int(dpt.max_depth)} if dpt.max_depth is not None else {}),  # its config types it int
    )


def _loaded(cls, config, state: dict) -> nn.Module:
    """transformers' ``cls`` built without its random initialisation (``no_init_weights``, as its own
    ``from_pretrained`` does: 6 s of a Large model's build), then given ``state``; the one tensor a checkpoint does not
    hold, DINOv2's ``mask_token`` (used only to mask tokens in pretraining), is set to 0."""
    from transformers.initialization import no_init_weights

    with no_init_weights():
        model = cls(config).eval()
    missing, unexpected = model.load_state_dict(state, strict=False)
    masks = [k for k in missing if k.endswith("mask_token")]
    missing = [k for k in missing if k not in masks]
    if missing or unexpected:
        raise RuntimeError(f"reference load failed: missing {missing[:5]}, unexpected {unexpected[:5]}")
    with torch.no_grad():
        for name in masks:
            model.get_parameter(name).zero_()
    return model


class TransformersReference(nn.Module):
    """transformers' DepthAnythingForDepthEstimation; returns predicted_depth (B, H, W)."""

    def __init__(self, spec: ModelSpec, weights: LoadedWeights):
        super().__init__()
        from transformers import DepthAnythingForDepthEstimation

        state = {_v5_name(k): v for k, v in TRANSFORMERS.from_depthport(weights.state).items()}
        self.model = _loaded(DepthAnythingForDepthEstimation, transformers_config(spec), state)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=x).predicted_depth


class PromptTransformersReference(nn.Module):
    """transformers' PromptDepthAnythingForDepthEstimation; (image, prompt in metres) -> predicted_depth (B, H, W)."""

    def __init__(self, spec: ModelSpec, weights: LoadedWeights):
        super().__init__()
        from transformers import PromptDepthAnythingConfig, PromptDepthAnythingForDepthEstimation

        from .weights.formats import TRANSFORMERS_PROMPT

        state = {_v5_name(k): v for k, v in TRANSFORMERS_PROMPT.from_depthport(weights.state).items()}
        self.model = _loaded(PromptDepthAnythingForDepthEstimation,
                             transformers_config(spec, PromptDepthAnythingConfig), state)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, prompt: torch.Tensor | None = None) -> torch.Tensor:
        """Metres with a prompt; without one (``prompt=None``), depth with no unit, as upstream gives it."""
        return self.model(pixel_values=x, prompt_depth=prompt).predicted_depth


class OfficialResamplingReference(TransformersReference):
    """transformers' DepthAnythingForDepthEstimation with Depth-Anything-V2's official pos-embed resampling, (n+0.1)/37;
    the reference for official ``.pth`` checkpoints (the part before the semicolon is the report's label).

    The official repository's ``depth_anything_v2/dpt.py`` (which holds DepthAnythingV2 and DPTHead) imports OpenCV
    and torchvision at module level, and no torchvision wheel on the package index imports beside the CPU torch
    build, so the official class cannot be built here. The network is transformers' (the same DINOv2 + DPT
    computation, converted by transformers' own script); only this instance's embeddings take the official
    ``interpolate_pos_encoding``, which differs from transformers' ``size=`` resampling away from the pretraining grid.
    """

    def __init__(self, spec: ModelSpec, weights: LoadedWeights):
        super().__init__(spec, weights)
        embeddings = self.model.backbone.embeddings
        embeddings.__class__ = _official_resampling(type(embeddings))


def _official_resampling(base: type) -> type:
    """``base`` (transformers' Dinov2Embeddings) with the official DINOv2 ``interpolate_pos_encoding``.

    As in DepthAnything/Depth-Anything-V2 ``dinov2.py``: no resampling at the pretraining grid when the input is
    square; otherwise the float32 grid is resampled bicubically with ``scale_factor=((h // 14 + 0.1) / sqrt(N),
    (w // 14 + 0.1) / sqrt(N))`` (interpolate_offset 0.1, no antialias) and cast back to the tokens' dtype.
    """

    class OfficialResamplingEmbeddings(base):
        def interpolate_pos_encoding(self, embeddings: torch.Tensor, height: int, width: int) -> torch.Tensor:
            npatch, n = embeddings.shape[1] - 1, self.position_embeddings.shape[1] - 1
            if npatch == n and height == width:
                return self.position_embeddings
            pos = self.position_embeddings.float()
            dim, sqrt_n = embeddings.shape[-1], math.sqrt(n)
            h0, w0 = height // self.patch_size + 0.1, width // self.patch_size + 0.1
            grid = pos[:, 1:].reshape(1, int(sqrt_n), int(sqrt_n), dim).permute(0, 3, 1, 2)
            grid = nn.functional.interpolate(grid, scale_factor=(h0 / sqrt_n, w0 / sqrt_n), mode="bicubic",
                                             antialias=False)
            if tuple(grid.shape[-2:]) != (int(h0), int(w0)):
                raise RuntimeError(f"official resampling gave {tuple(grid.shape[-2:])}, expected {(int(h0), int(w0))}")
            grid = grid.permute(0, 2, 3, 1).reshape(1, -1, dim)
            return torch.cat((pos[:, :1], grid), dim=1).to(embeddings.dtype)

    name = f"OfficialResampling{base.__name__}"
    OfficialResamplingEmbeddings.__name__ = OfficialResamplingEmbeddings.__qualname__ = name
    return OfficialResamplingEmbeddings


def _v5_name(key: str) -> str:
    """Hub-file names -> the module names of transformers >= 5 (which renames only when loading files)."""
    return (key.replace(".attention.attention.query.", ".attention.q_proj.")
               .replace(".attention.attention.key.", ".attention.k_proj.")
               .replace(".attention.attention.value.", ".attention.v_proj.")
               .replace(".attention.output.dense.", ".attention.o_proj."))


class OfficialDA3Reference(nn.Module):
    """The `depth-anything-3` package's DepthAnything3Net, backbone and depth head; returns depth (1, 1, H, W) for
    one image.

    The network's camera decoder runs after the depth head and only adds the camera (it also fails in float64), so
    the reference stops at the head's output, as the network's own forward computes it. Imports only ``depth_anything_3.cfg``/``.registry``/``.model`` (the package root and its API pull in
    torchvision and OpenCV, which are not needed to build the network). Tiny configs are assembled from the
    package's own DinoVisionTransformer and DualDPT (or DPT); the camera decoder is left out there.
    """

    def __init__(self, spec: ModelSpec, weights: LoadedWeights):
        super().__init__()
        fmt = spec.arch.weight_formats[0]
        self.model = _official_da3(spec).eval()
        self.label = f"depth-anything-3 {version('depth-anything-3')} DepthAnything3Net, weights {weights.source}"
        state = {k.removeprefix(fmt.prefix): v for k, v in fmt.from_depthport(weights.state).items()}
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not any(re.fullmatch(p, k) for p in fmt.ignored)]
        if missing or unexpected:
            raise RuntimeError(f"reference load failed: missing {missing[:5]}, unexpected {unexpected[:5]}")

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        outs = []
        for i in range(x.shape[0]):
            feats, _ = self.model.backbone(x[i : i + 1, None])
            outs.append(self.model._process_depth_head(feats, h, w).depth)
        return torch.cat(outs)


class OfficialDA3MonoReference(OfficialDA3Reference):
    """The `depth-anything-3` package's DepthAnything3Net (DA3Metric / DA3Mono), backbone and depth head, before its
    sky fill; returns the head's depth (1, 1, H, W) for one image.

    The network then sets the pixels its sky head calls sky to the 99th percentile of the other pixels' depth (a
    randomly sampled quantile): post-processing outside the depth network, which the export does not contain."""


def _official_da3(spec: ModelSpec) -> nn.Module:
    from depth_anything_3.cfg import create_object, load_config
    from depth_anything_3.registry import MODEL_REGISTRY
    from depth_anything_3.utils.logger import LOG_LEVELS, logger

    logger.level = min(logger.level, LOG_LEVELS["WARN"])  # its INFO lines go to stdout
    for name in (spec.config, f"da3-{spec.config}"):
        if name in MODEL_REGISTRY:
            return create_object(load_config(MODEL_REGISTRY[name]))
    if spec.arch.name == "depth-anything-3-mono":
        return _official_da3_mono_tiny(spec.model_config)
    from depth_anything_3.model.da3 import DepthAnything3Net
    from depth_anything_3.model.dinov2.dinov2 import DinoV2 as OfficialDinoV2
    from depth_anything_3.model.dinov2.vision_transformer import DinoVisionTransformer
    from depth_anything_3.model.dualdpt import DualDPT

    cfg = spec.model_config
    vit, head = cfg.vit, cfg.head
    backbone = OfficialDinoV2("vits", list(cfg.out_layers), cfg.alt_start, cfg.qknorm_start, cfg.rope_start)
    backbone.pretrained = DinoVisionTransformer(
        img_size=vit.pretrain_hw[0], patch_size=vit.patch, embed_dim=vit.dim, depth=vit.depth,
        num_heads=vit.heads, mlp_ratio=vit.mlp_ratio, alt_start=cfg.alt_start, qknorm_start=cfg.qknorm_start,
        rope_start=cfg.rope_start, rope_freq=cfg.rope_base, cat_token=True,
    )
    dpt = DualDPT(head.in_dim, output_dim=head.output_dim, features=head.features, out_channels=list(head.out_channels))
    return DepthAnything3Net(backbone, dpt)


def _official_da3_mono_tiny(cfg) -> nn.Module:
    """The package's DepthAnything3Net for a toy-size monocular config: DinoVisionTransformer without RoPE,
    QK-norm or camera token, and its DPT head (exp, sky head included as upstream builds it)."""
    from depth_anything_3.model.da3 import DepthAnything3Net
    from depth_anything_3.model.dinov2.dinov2 import DinoV2 as OfficialDinoV2
    from depth_anything_3.model.dinov2.vision_transformer import DinoVisionTransformer
    from depth_anything_3.model.dpt import DPT

    vit, dpt = cfg.vit, cfg.dpt
    backbone = OfficialDinoV2("vits", list(cfg.layers), cat_token=False)
    backbone.pretrained = DinoVisionTransformer(
        img_size=vit.pretrain_hw[0], patch_size=vit.patch, embed_dim=vit.dim, depth=vit.depth,
        num_heads=vit.heads, mlp_ratio=vit.mlp_ratio, cat_token=False,
    )
    head = DPT(dpt.in_dim, output_dim=1, features=dpt.features, out_channels=list(dpt.out_channels))
    return DepthAnything3Net(backbone, head)


def reference_model(spec: ModelSpec, weights: LoadedWeights) -> nn.Module:
    """The upstream code that matches the model and the weights' source, as ``spec``'s family chooses it (Depth
    Anything V2: official ``.pth`` checkpoints get the official position-embedding resampling, transformers-format
    and random weights get transformers as it is; Depth Anything 3: the `depth-anything-3` package)."""
    return spec.arch.reference(spec, weights)
