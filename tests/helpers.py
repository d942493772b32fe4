"""Small shared test utilities (tests/ is on sys.path under pytest's default import mode)."""

import numpy as np
import torch

TINY_HW = (56, 70)


def rel_l2(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def image_batch(hw, seed=0) -> torch.Tensor:
    """A smooth, image-like normalised input (random noise would make every model look exact)."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.randn(1, 3, hw[0] // 7, hw[1] // 7, generator=g)
    return torch.nn.functional.interpolate(coarse, size=hw, mode="bilinear", align_corners=False) * 1.5


def vulkan_or_skip():
    """The Vulkan setup for the LiteRT GPU accelerator (SwiftShader here), or skip the calling test."""
    import pytest

    from depthport.check.swiftshader import VulkanUnavailable, find_vulkan

    try:
        return find_vulkan()
    except VulkanUnavailable as exc:
        pytest.skip(f"no Vulkan: {exc}")
