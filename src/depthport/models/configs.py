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


@dataclass(frozen=True)
class DPTConfig:
    in_dim: int
    out_channels: tuple[int, int, int, int]
    features: int
    head_hidden: int = 32


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


DA2_CONFIGS = {
    "small": DepthAnythingV2Config(ViTConfig(384, 12, 6), DPTConfig(384, (48, 96, 192, 384), 64), (2, 5, 8, 11)),
    "base": DepthAnythingV2Config(ViTConfig(768, 12, 12), DPTConfig(768, (96, 192, 384, 768), 128), (2, 5, 8, 11)),
    "large": DepthAnythingV2Config(
        ViTConfig(1024, 24, 16), DPTConfig(1024, (256, 512, 1024, 1024), 256), (4, 11, 17, 23)
    ),
    # The real architecture at toy width and depth, for tests.
    "tiny": DepthAnythingV2Config(
        ViTConfig(32, 4, 2, pretrain_grid=4), DPTConfig(32, (8, 16, 24, 32), 16, head_hidden=8), (0, 1, 2, 3)
    ),
}

DA3_CONFIGS = {
    # depth_anything_3/configs/da3-small.yaml (DinoV2 "vits" at img_size 518, patch 14: a 37x37 grid)
    "small": DepthAnythingV3Config(ViTConfig(384, 12, 6), DualDPTConfig(768, (48, 96, 192, 384), 64),
                                   (5, 7, 9, 11), alt_start=4, qknorm_start=4, rope_start=4),
    # The real architecture at toy size, for tests: a local and a pre-RoPE layer among the outputs.
    "tiny": DepthAnythingV3Config(ViTConfig(32, 6, 2, pretrain_grid=4), DualDPTConfig(64, (8, 16, 24, 32), 16),
                                  (1, 3, 4, 5), alt_start=2, qknorm_start=2, rope_start=2),
}
