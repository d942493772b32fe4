"""Small shared test utilities (tests/ is on sys.path under pytest's default import mode)."""

import os

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


def save_checkpoint(state: dict, path) -> str:
    """A state dict written as the upstream checkpoint formats are: .safetensors, else torch.save; its path."""
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state, path)
    return str(path)


def gpu_ok(art: dict):
    """True / False / None: the GPU verdict of a .tflite entry, from its checks (``check.verdict.gpu_outcome``)."""
    from depthport.check.verdict import gpu_outcome

    return gpu_outcome(art)[0].to_dict()["passed"]


def gpu_reason(art: dict) -> str | None:
    from depthport.check.verdict import gpu_outcome

    return gpu_outcome(art)[1]


def shipped(art: dict) -> bool:
    return art["status"] == "shipped"


def must_run() -> bool:
    """Under CI (CI=true) or with DEPTHPORT_REQUIRE_GPU=1, accelerator and reference tests may not skip."""
    truthy = ("1", "true", "yes")
    return os.environ.get("CI", "").lower() in truthy or os.environ.get("DEPTHPORT_REQUIRE_GPU", "") in truthy


def skip_or_fail(reason: str):
    """Skip the calling test, or fail it where skipping is not allowed (``must_run``)."""
    import pytest

    if must_run():
        pytest.fail(f"{reason} (CI=true or DEPTHPORT_REQUIRE_GPU=1: this test may not be skipped)")
    pytest.skip(reason)


def vulkan_or_skip():
    """The Vulkan setup for the LiteRT GPU accelerator (SwiftShader here), or skip the calling test (fail in CI)."""
    from depthport.runtimes.swiftshader import VulkanUnavailable, find_vulkan

    try:
        return find_vulkan()
    except VulkanUnavailable as exc:
        skip_or_fail(f"no Vulkan: {exc}")


def import_or_skip(module: str):
    """``pytest.importorskip`` that fails in CI instead of skipping."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        skip_or_fail(f"{module} is not installed: {exc}")


def browser_or_skip():
    """Chromium, Playwright and the pinned npm runtimes (scripts/setup_web.sh), or skip (fail in CI)."""
    from depthport.errors import InputError
    from depthport.web.chromium import CHROMIUM, SETUP_HINT
    from depthport.web.runtimes import RUNTIMES, runtime_files

    if not CHROMIUM.is_file():
        skip_or_fail(f"no Chromium at {CHROMIUM}; {SETUP_HINT}")
    try:
        import playwright  # noqa: F401

        for name in RUNTIMES:
            runtime_files(name)
    except (ModuleNotFoundError, InputError) as exc:
        skip_or_fail(f"browser setup missing: {exc}")


def swapped_profile() -> bytes:
    """sRGB with the red and blue primaries exchanged: a real, non-sRGB RGB profile (LittleCMS's own sRGB,
    its rXYZ and bXYZ tag entries swapped)."""
    import struct

    from PIL import ImageCms

    data = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    count = struct.unpack(">I", data[128:132])[0]
    entries = {bytes(data[132 + 12 * i:136 + 12 * i]): 132 + 12 * i for i in range(count)}
    r, b = entries[b"rXYZ"], entries[b"bXYZ"]
    data[r + 4:r + 12], data[b + 4:b + 12] = data[b + 4:b + 12], data[r + 4:r + 12]
    return bytes(data)
