"""Prompt depth maps (Prompt Depth Anything's second input: coarse metric depth from a phone's LiDAR or ToF
sensor, in metres), read from the user's files and made for the built-in verification images.

Files: ``.npy`` holds metres, a PNG 16-bit millimetres (ARKit and Android DEPTH16 apps save that way). A map
that cannot be a depth prompt (NaN, negative, all one value, 8-bit, millimetres in an .npy) is refused in one line.

Built-in images: the motorcycle scene has metric ground truth, and its prompt is a simulated LiDAR map of it
(``lidar_prompt``: area-downsampled to the prompt shape, 1 % multiplicative noise, small holes filled from their
nearest valid neighbour as ARKit's smoothed depth is, seeded). The other images have no ground truth: theirs is a
seeded smooth synthetic depth of 0.5 to 4.5 m (``synthetic_prompt``), which tests the arithmetic, not accuracy.
"""

from __future__ import annotations

import functools
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

from ..errors import InputError, utf8_text
from ..file_kind import head
from .ground_truth import depth_from_disparity, motorcycle
from .patterns import local_path, set_root

PROMPT_SUFFIXES = (".npy", ".png")  # NAME.prompt.npy (metres) or NAME.prompt.png (16-bit millimetres)
PROMPT_TAG = ".prompt"
HEIGHT_FIRST = "height x width; portrait and landscape differ"  # how a refused prompt shape is given
MAX_METRES = 100.0  # farther than any phone depth sensor: an .npy above it holds millimetres, not metres
NOISE, HOLES, HOLE_RADIUS = 0.01, 12, (1, 3)


def is_prompt_file(path: Path) -> bool:
    """``NAME.prompt.png`` / ``NAME.prompt.npy``: a prompt beside the image NAME, not an image of its own."""
    return Path(path).suffix.lower() in PROMPT_SUFFIXES and Path(path).stem.endswith(PROMPT_TAG)


def not_npy(path: Path) -> str | None:
    """Why ``np.load`` refused ``path``, where it is not an .npy at all: 'a PNG image, not an .npy', or 'not an .npy
    file (its first bytes are not NumPy's)' (NumPy's own words, 'contains pickled (object) data', advise loading
    it unsafely); None for a file that starts as an .npy does."""
    if head(path, 6) == b"\x93NUMPY":
        return None
    try:
        with Image.open(path) as image:
            return f"a {image.format} image, not an .npy"
    except Exception:  # noqa: BLE001 (any of Pillow's errors: not an image either)
        return "not an .npy file (its first bytes are not NumPy's)"


def load_prompt(path: str | Path) -> np.ndarray:
    """A prompt file -> (h, w) float32 metres, checked (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"prompt file not found: {path}")
    try:
        if path.suffix.lower() == ".npy":
            depth = np.load(path, allow_pickle=False)
            if depth.dtype.kind not in "fiu":
                raise InputError(f"prompt {path.name} holds {depth.dtype} values, not depth in metres")
            depth = np.asarray(depth, np.float64)
            unit = "m"
        else:
            with Image.open(path) as image:
                if image.mode not in ("I;16", "I;16B", "I;16L", "I"):
                    raise InputError(f"prompt {path.name} is a {image.mode} image: a prompt PNG holds 16-bit "
                                     "millimetres (or give metres in an .npy)")
                depth = np.asarray(image, np.float64) / 1000.0
            unit = "mm"
    except (OSError, ValueError) as exc:
        reason = not_npy(path) if path.suffix.lower() == ".npy" else None
        raise InputError(f"cannot read prompt {path}: {reason or exc}") from None
    depth = np.squeeze(depth)
    if depth.ndim != 2:
        raise InputError(f"prompt {path.name} has shape {list(np.shape(depth))}: expected a 2-D depth map")
    return check_prompt(depth, path.name, unit)


def check_prompt(depth: np.ndarray, name: str, unit: str = "m") -> np.ndarray:
    """``depth`` (h, w) in metres if it can be a depth prompt, as float32; else one InputError line."""
    if not np.isfinite(depth).all():
        raise InputError(f"prompt {name} has NaN or infinite values: fill them (a prompt is a dense depth map)")
    if (depth < 0).any():
        raise InputError(f"prompt {name} has negative depths: a prompt holds distances in metres")
    low, high = float(depth.min()), float(depth.max())
    if high == low:
        raise InputError(f"prompt {name} is {low:g} m everywhere: a prompt needs a range of depths (Prompt Depth "
                         "Anything normalises it by its minimum and maximum)")
    if unit == "m" and high > MAX_METRES:
        raise InputError(f"prompt {name} reaches {high:g}: too far for metres (millimetres?); an .npy prompt holds "
                         "metres, a 16-bit PNG millimetres")
    return np.asarray(depth, np.float32)


def prompt_input(depth: np.ndarray, prompt_hw: tuple[int, int], name: str) -> np.ndarray:
    """(h, w) metres -> the model's (1, 1, h, w) prompt input; a map of another shape is refused."""
    if tuple(depth.shape) != tuple(prompt_hw):
        raise InputError(f"prompt {name} is {depth.shape[0]}x{depth.shape[1]} but the model takes a "
                         f"{prompt_hw[0]}x{prompt_hw[1]} prompt ({HEIGHT_FIRST})")
    return np.array(depth, np.float32)[None, None]  # a copy: ``depth`` may be a cached built-in prompt


def synthetic_prompt(prompt_hw: tuple[int, int], seed: int) -> np.ndarray:
    """(h, w) metres: a tilted plane with four seeded Gaussian bumps, stretched to 0.5 to 4.5 m."""
    rng = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.linspace(0, 1, prompt_hw[0]), np.linspace(0, 1, prompt_hw[1]), indexing="ij")
    depth = 1.0 + 2.0 * yy + 0.5 * xx
    for _ in range(4):
        cy, cx, r, a = rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0.1, 0.3), rng.uniform(-0.8, 0.8)
        depth += a * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
    return (0.5 + 4.0 * (depth - depth.min()) / (depth.max() - depth.min())).astype(np.float32)


def _fill_nearest(depth: np.ndarray, valid: np.ndarray) -> np.ndarray:
    from scipy.ndimage import distance_transform_edt

    _, (iy, ix) = distance_transform_edt(~valid, return_indices=True)
    return depth[iy, ix]


def lidar_prompt(depth_m: np.ndarray, prompt_hw: tuple[int, int], seed: int = 0) -> np.ndarray:
    """(h, w) metres: a simulated phone LiDAR map of the metric ground truth ``depth_m`` (NaN = invalid)."""
    valid = np.isfinite(depth_m) & (depth_m > 0)
    dense = _fill_nearest(np.where(valid, depth_m, 0.0), valid).astype(np.float32)
    small = np.asarray(Image.fromarray(dense, mode="F").resize((prompt_hw[1], prompt_hw[0]), Image.Resampling.BOX),
                       np.float64)
    rng = np.random.default_rng(seed)
    small *= 1.0 + NOISE * rng.standard_normal(small.shape)
    holes = np.zeros(small.shape, bool)
    yy, xx = np.mgrid[: small.shape[0], : small.shape[1]]
    for _ in range(HOLES):
        cy, cx = rng.integers(0, small.shape[0]), rng.integers(0, small.shape[1])
        r = rng.integers(HOLE_RADIUS[0], HOLE_RADIUS[1] + 1)
        holes |= (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    return _fill_nearest(small, ~holes).astype(np.float32)


@functools.lru_cache(maxsize=8)
def builtin_prompt(name: str, prompt_hw: tuple[int, int]) -> tuple[np.ndarray, str]:
    """(h, w) metres for a built-in image and how it was made; made once per image and shape (the motorcycle's is
    also each file's accuracy prompt). Callers copy it (``prompt_input``)."""
    if name == "motorcycle_left":
        _, disparity = motorcycle()
        return lidar_prompt(depth_from_disparity(disparity), prompt_hw), "simulated LiDAR of the ground truth"
    return synthetic_prompt(prompt_hw, zlib.crc32(name.encode())), "synthetic smooth depth (no ground truth)"


def prompt_beside(image: Path) -> Path:
    """The prompt file of ``image`` (``NAME.prompt.npy`` first, then ``NAME.prompt.png``); an InputError if none."""
    for suffix in PROMPT_SUFFIXES:
        candidate = image.with_name(f"{image.stem}{PROMPT_TAG}{suffix}")
        if candidate.is_file():
            return candidate
    raise InputError(f"{image.name} has no prompt beside it: a model with a prompt input needs "
                     f"{image.stem}{PROMPT_TAG}.npy (metres) or {image.stem}{PROMPT_TAG}.png (16-bit millimetres)")


def prompt_set(source: str | Path | None, names: list[str], prompt_hw: tuple[int, int]) -> tuple[dict, dict]:
    """({image name: (1, 1, h, w) prompt}, {image name: where it came from}) for the images of ``image_set``."""
    prompts, origins = {}, {}
    if source is not None:  # the names are shown in UTF-8 (``utf8_text``): a Latin-1 file name is found by it too
        folder = set_root(local_path(str(source)))
        stored = {utf8_text(p.name): p for p in folder.iterdir()}
    for name in names:
        if source is None:
            depth, origins[name] = builtin_prompt(name, tuple(prompt_hw))
        else:
            path = prompt_beside(stored.get(name, folder / name))
            depth, origins[name] = load_prompt(path), utf8_text(path.name)
        prompts[name] = prompt_input(depth, prompt_hw, origins[name] if source is not None else name)
    return prompts, origins
