"""Web targets: a self-contained folder that runs the model in a browser page (``depthport.web``).

``web`` carries the FP32 .tflite for LiteRT.js, ``web-onnx`` the .onnx for onnxruntime-web; both with the runtime's
files from the pinned npm packages. The model file is the one the ``litert-fp32`` / ``onnx`` target writes (made
once when both are asked for). The page preprocesses as depthport does for Depth Anything V2 (bicubic stretch), so
only models fed that way get a page.
"""

from __future__ import annotations

from pathlib import Path

from ..core.schema import ArtifactJson
from ..errors import InputError
from ..preprocess import to_tensor
from ..web.folder import folder_bytes, page_config, write_web_folder
from . import onnx
from .context import ExportContext, artifact_entry
from .litert import export_tflite

WEB_TARGETS = {"web": "litert.js", "web-onnx": "onnxruntime-web"}


def page_meta(ctx: ExportContext) -> dict:
    """What the page and ``depthport verify`` need to know about the model besides the file."""
    from .. import __version__

    b = ctx.built
    return {"model": b.spec.id, "weights": b.weights.argument,
            "random_weights": b.weights.random, "output": b.spec.output, "rewrites": list(b.rewrites),
            "pos_embed_formula": b.pos_formula, "made_by": f"depthport {__version__}"}


def model_file(ctx: ExportContext, runtime: str) -> Path:
    """The model file the page runs: the litert-fp32 / onnx target's file when it exists, else made here."""
    b = ctx.built
    if runtime == "litert.js":
        if ctx.fp32_source is None:
            ctx.fp32_source = export_tflite(b.model, b.input_hw, ctx.scratch / f"{ctx.stem}_fp32.tflite")
        return ctx.fp32_source
    if "onnx" in ctx.files:
        return ctx.files["onnx"]
    return onnx.export_onnx(b.model, b.input_hw, ctx.scratch / f"{ctx.stem}.onnx")


def web_target(ctx: ExportContext, name: str) -> dict:
    runtime = WEB_TARGETS[name]
    spec = ctx.built.spec
    if spec.arch.preprocess is not to_tensor:
        raise InputError(f"--targets {name}: the page feeds images as Depth Anything V2 is fed (bicubic stretch); "
                         f"{spec.id} is preprocessed otherwise, which the page does not do yet")
    source = model_file(ctx, runtime)
    folder = ctx.out_dir / f"{ctx.stem}_{name.replace('-', '_')}"
    normalize = "fold_input_normalization" not in ctx.built.rewrites
    config = page_config(runtime, "model" + source.suffix, ctx.built.input_hw, normalize, page_meta(ctx),
                         ctx.built.prompt_hw)
    write_web_folder(folder, source, runtime, config)
    ctx.files[name] = folder
    entry = artifact_entry(ctx, folder, name, precision="fp32", runtime=f"{runtime} {config['runtime_version']}",
                           web={"runtime": runtime, "model_file": config["model_file"],
                                "runtime_version": config["runtime_version"]}, **summary(folder / config["model_file"]))
    ArtifactJson(entry).bytes = folder_bytes(folder)
    return entry


def summary(path: Path) -> dict:
    """Op statistics of the page's model file."""
    if path.suffix == ".onnx":
        return onnx.graph_summary(path)
    from ..core.tflite_graph import graph_summary

    return graph_summary(path)

