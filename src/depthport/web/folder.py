"""A web folder: the page (``static/``), one model file, the runtime's files and ``depthport-web.json``.

The folder is self-contained: served from 127.0.0.1 (``depthport serve DIR``) the page loads nothing from
anywhere else. ``depthport-web.json`` tells the page (and ``depthport verify``) what the model is: its file,
runtime, input shape and preprocessing, where its weights came from, and the colour map of the depth view.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..errors import InputError
from ..preprocess import IMAGENET_MEAN, IMAGENET_STD
from .runtimes import RUNTIMES, provenance, runtime_files

STATIC = Path(__file__).parent / "static"
PAGE_FILES = ("index.html", "depthport.js")
CONFIG = "depthport-web.json"
EXAMPLE = Path(__file__).parent.parent / "assets" / "chelsea.jpg"
FORMAT = 1


def colormap_lut(name: str = "Spectral_r", n: int = 256) -> list[list[int]]:
    """matplotlib's colour map as n RGB triples (the page colours depth with it, as depthport.visualize does)."""
    import numpy as np
    from matplotlib import colormaps

    return (colormaps[name](np.linspace(0.0, 1.0, n))[:, :3] * 255).round().astype(int).tolist()


PROMPT_EXAMPLE = "example.prompt.npy"


def page_config(runtime: str, model_file: str, input_hw: tuple[int, int], normalize: bool, meta: dict,
                prompt_hw: tuple[int, int] | None = None) -> dict:
    """``depthport-web.json``: ``meta`` (model, weights, random_weights, output, rewrites, ...) plus what the page
    needs to load and feed the model; a prompted model's prompt shape and the bundled example prompt."""
    prompted = {"prompt_shape": [1, 1, *prompt_hw], "prompt": PROMPT_EXAMPLE,
                "prompt_units": "an .npy in metres or a 16-bit PNG in millimetres, sampled (nearest) to prompt_shape"
                } if prompt_hw else {}
    return {"format": FORMAT, **meta, **prompted, "runtime": runtime, "runtime_version": RUNTIMES[runtime].version,
            "runtime_packages": provenance(runtime), "model_file": model_file,
            "input_shape": [1, 3, *input_hw], "normalize": normalize,
            "mean": list(IMAGENET_MEAN), "std": list(IMAGENET_STD),
            "preprocess": "stretched to the input shape with Pillow's bicubic resample (ported to JS), x/255, "
                          + ("ImageNet mean/std, " if normalize else "") + "NCHW float32",
            "image": "example.jpg", "colormap": "Spectral_r", "lut": colormap_lut()}


def write_web_folder(folder: Path, model: Path, runtime: str, config: dict) -> Path:
    """Fill ``folder`` (created; must not exist) with the page, a copy of ``model``, the runtime's files and
    ``config`` (``page_config``). InputError when the runtime's npm packages are not installed."""
    if runtime not in RUNTIMES:
        raise InputError(f"unknown web runtime {runtime!r}; known: {', '.join(RUNTIMES)}")
    if model.suffix != RUNTIMES[runtime].suffix:
        raise InputError(f"{runtime} runs {RUNTIMES[runtime].suffix} files, not {model.name}")
    files = runtime_files(runtime)  # checked before anything is written
    folder.mkdir(parents=True)
    for name in PAGE_FILES:
        shutil.copyfile(STATIC / name, folder / name)
    shutil.copyfile(EXAMPLE, folder / config["image"])
    if config.get("prompt_shape"):  # the example's prompt: seeded smooth depth (the photo has no measured depth)
        import numpy as np

        from ..core.prompts import synthetic_prompt

        np.save(folder / config["prompt"], synthetic_prompt(tuple(config["prompt_shape"][2:]), seed=0))
    shutil.copyfile(model, folder / config["model_file"])
    for src, rel in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, folder / rel)
    (folder / CONFIG).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    return folder


def read_config(folder: str | Path) -> dict:
    """The ``depthport-web.json`` of a web folder; InputError when ``folder`` is not one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder (a web export is a folder with index.html and {CONFIG})")
    path = folder / CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{folder} is not a depthport web folder: no {CONFIG}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} cannot be read: {exc}") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT or config.get("runtime") not in RUNTIMES:
        raise InputError(f"{path} is not a depthport web config of format {FORMAT}")
    for name in (*PAGE_FILES, config.get("model_file", "?")):
        if not (folder / name).is_file():
            raise InputError(f"{folder} is incomplete: {name} is missing")
    return config


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def is_web_folder(path: str | Path) -> bool:
    return Path(path).is_dir() and (Path(path) / CONFIG).is_file()
