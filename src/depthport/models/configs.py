"""Architecture configurations of each family and size, as plain data (no torch: the registry reads them).

Each family has its released sizes and a ``tiny`` one: the same architecture at toy width and depth, for tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ViTConfig:
    dim: int
    depth: int
    heads: int
    patch: int = 14
    pretrain_grid: int = 37  # patches per side of the pretraining shape, where the position embedding is stored
    mlp_ratio: float = 4.0
    eps: float = 1e-6

    @property
    def pretrain_hw(self) -> tuple[int, int]:
        """The (square) input shape the checkpoint's position embedding was trained at: patch x pretrain grid."""
        side = self.patch * self.pretrain_grid
        return side, side


HEAD_ACTIVATIONS = ("relu", "sigmoid", "exp")


@dataclass(frozen=True)
class DPTConfig:
    """A DPT head. ``activation`` ends it: "relu" (relative depth), "sigmoid" times ``max_depth`` in metres
    (Depth Anything V2 metric), "exp" (Depth Anything 3's DPT). ``first_skip`` is False where the coarsest fusion
    block has no skip unit in the checkpoints (Depth Anything 3)."""

    in_dim: int
    out_channels: tuple[int, int, int, int]
    features: int
    head_hidden: int = 32
    activation: str = "relu"
    max_depth: float | None = None
    first_skip: bool = True

    def __post_init__(self):
        if self.activation not in HEAD_ACTIVATIONS:
            raise ValueError(f"head activation {self.activation!r} is not one of {HEAD_ACTIVATIONS}")
        if (self.activation == "sigmoid") != (self.max_depth is not None):
            raise ValueError("a sigmoid head needs max_depth (metres), and only a sigmoid head takes one")


@dataclass(frozen=True)
class DualDPTConfig:
    in_dim: int
    out_channels: tuple[int, int, int, int]
    features: int
    head_hidden: int = 32
    output_dim: int = 2
    pos_ratio: float = 0.1
    pos_omega: float = 100.0
    norm_eps: float = 1e-5


@dataclass(frozen=True)
class DepthAnythingV2Config:
    vit: ViTConfig
    dpt: DPTConfig
    layers: tuple[int, int, int, int]


@dataclass(frozen=True)
class DepthAnythingV3MonoConfig(DepthAnythingV2Config):
    """Depth Anything 3's monocular models (DA3Metric, DA3Mono): a plain DINOv2 (no RoPE, QK-norm or camera
    token) whose final norm has eps ``norm_eps``, and a DPT head ending in exp."""

    norm_eps: float = 1e-5


@dataclass(frozen=True)
class DepthAnythingV3Config:
    vit: ViTConfig
    head: DualDPTConfig
    out_layers: tuple[int, int, int, int]
    alt_start: int
    qknorm_start: int
    rope_start: int
    rope_base: float = 100.0
    norm_eps: float = 1e-5

    def is_global(self, i: int) -> bool:
        """Blocks from ``alt_start`` on alternate local (even) and global (odd) attention."""
        return self.alt_start != -1 and i >= self.alt_start and i % 2 == 1


_DA2_SIZES = {  # ViT, DPT head (in_dim, out_channels, features), layers of the four outputs
    "small": (ViTConfig(384, 12, 6), (384, (48, 96, 192, 384), 64), (2, 5, 8, 11)),
    "base": (ViTConfig(768, 12, 12), (768, (96, 192, 384, 768), 128), (2, 5, 8, 11)),
    "large": (ViTConfig(1024, 24, 16), (1024, (256, 512, 1024, 1024), 256), (4, 11, 17, 23)),
    # The real architecture at toy width and depth, for tests.
    "tiny": (ViTConfig(32, 4, 2, pretrain_grid=4), (32, (8, 16, 24, 32), 16, 8), (0, 1, 2, 3)),
}
# Depth Anything V2 metric (metric_depth/ of the official repository): the same network, its head ending in
# sigmoid x max_depth. Hypersim (indoor) models are trained to 20 m, Virtual KITTI 2 (outdoor) ones to 80 m.
METRIC_MAX_DEPTH = {"indoor": 20.0, "outdoor": 80.0}


def _da2(size: str, **head) -> DepthAnythingV2Config:
    vit, dpt, layers = _DA2_SIZES[size]
    return DepthAnythingV2Config(vit, DPTConfig(*dpt, **head), layers)


DA2_CONFIGS = {
    **{size: _da2(size) for size in _DA2_SIZES},
    **{f"metric-{scene}-{size}": _da2(size, activation="sigmoid", max_depth=depth)
       for scene, depth in METRIC_MAX_DEPTH.items() for size in ("small", "base", "large")},
    # One tiny metric config for both scenes: the architecture is the same, only the constant differs.
    "metric-tiny": _da2("tiny", activation="sigmoid", max_depth=METRIC_MAX_DEPTH["indoor"]),
}

DA3_CONFIGS = {
    # depth_anything_3/configs/da3-small.yaml (DinoV2 "vits" at img_size 518, patch 14: a 37x37 grid)
    "small": DepthAnythingV3Config(ViTConfig(384, 12, 6), DualDPTConfig(768, (48, 96, 192, 384), 64),
                                   (5, 7, 9, 11), alt_start=4, qknorm_start=4, rope_start=4),
    # depth_anything_3/configs/da3-base.yaml: vitb, the same RoPE / QK-norm / camera-token scheme
    "base": DepthAnythingV3Config(ViTConfig(768, 12, 12), DualDPTConfig(1536, (96, 192, 384, 768), 128),
                                  (5, 7, 9, 11), alt_start=4, qknorm_start=4, rope_start=4),
    # The real architecture at toy size, for tests: a local and a pre-RoPE layer among the outputs.
    "tiny": DepthAnythingV3Config(ViTConfig(32, 6, 2, pretrain_grid=4), DualDPTConfig(64, (8, 16, 24, 32), 16),
                                  (1, 3, 4, 5), alt_start=2, qknorm_start=2, rope_start=2),
}

# depth_anything_3/configs/da3metric-large.yaml and da3mono-large.yaml: the same network (vitl, out_layers
# [4, 11, 17, 23], DPT dim_in 1024, features 256, out_channels [256, 512, 1024, 1024], output_dim 1, exp); they
# differ in training and so in what the output means. Each id has its own tiny config, of the same architecture.
_DA3_MONO_LARGE = DepthAnythingV3MonoConfig(
    ViTConfig(1024, 24, 16), DPTConfig(1024, (256, 512, 1024, 1024), 256, activation="exp", first_skip=False),
    (4, 11, 17, 23))
_DA3_MONO_TINY = DepthAnythingV3MonoConfig(  # head_hidden stays 32: the package's DPT fixes it
    ViTConfig(32, 4, 2, pretrain_grid=4), DPTConfig(32, (8, 16, 24, 32), 16, activation="exp", first_skip=False),
    (0, 1, 2, 3))
DA3_MONO_CONFIGS = {"da3metric-large": _DA3_MONO_LARGE, "da3mono-large": _DA3_MONO_LARGE,
                    "metric-tiny": _DA3_MONO_TINY, "mono-tiny": _DA3_MONO_TINY}

# Prompt Depth Anything (DepthAnything/PromptDA; transformers PromptDepthAnythingForDepthEstimation): Depth Anything
# V2 small or large with a prompt branch per fusion block and a sigmoid head (the hub configs' depth_estimation_type
# "metric", max_depth 1: the sigmoid is not scaled, the prompt's range stretches it into metres).
PROMPT_DA_CONFIGS = {
    "small": _da2("small", activation="sigmoid", max_depth=1.0),
    "large": _da2("large", activation="sigmoid", max_depth=1.0),
    "tiny": _da2("tiny", activation="sigmoid", max_depth=1.0),
}
