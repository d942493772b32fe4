"""ONNX targets: torch.onnx.export (dynamo exporter) of the re-authored model, one self-contained file; ``onnx``
at the export shape, ``onnx-dynamic`` with the input's height and width symbolic (multiples of 14)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import torch
from torch import nn

from ..atomic import atomic_path
from .context import ExportContext, artifact_entry

OPSET = 18
INPUT_NAME, PROMPT_NAME, OUTPUT_NAME = "image", "prompt", "depth"
PATCH = 14
MAX_GRID = 1024  # the largest patch grid side a dynamic export accepts (14336 pixels)
DEFAULT_HW_KEY = "depthport.default_input_hw"  # metadata of a dynamic export: the shape it was traced at
DEFAULT_PROMPT_HW_KEY = "depthport.default_prompt_hw"  # and, for a prompted model, the prompt's
MAX_PROMPT_SIDE = 4096


def export_onnx(model: nn.Module, input_hw: tuple[int, int], path: str | Path, opset: int = OPSET) -> Path:
    """Static-shape export with weights embedded (no external data; fine below ONNX's 2 GB protobuf limit). A
    prompted model (Prompt Depth Anything) has a second input, ``prompt`` (1, 1, h, w)."""
    import onnx

    from ..quiet import native_stderr_muted

    sample = (torch.zeros(1, 3, *input_hw),)
    prompt_hw = getattr(model, "prompt_hw", None)
    if prompt_hw:
        sample += (torch.ones(1, 1, *prompt_hw),)
    with native_stderr_muted():
        program = torch.onnx.export(model.eval(), sample, dynamo=True, opset_version=opset, optimize=True,
                                    verbose=False, input_names=[INPUT_NAME, PROMPT_NAME][: len(sample)],
                                    output_names=[OUTPUT_NAME], external_data=False)
    proto = program.model_proto
    onnx.checker.check_model(proto)
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(proto.SerializeToString())
    return path


def graph_summary(path: str | Path) -> dict:
    """op_count / op_histogram of the main graph (Constant nodes excluded) and the opset."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    ops = Counter(node.op_type for node in proto.graph.node if node.op_type != "Constant")
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    return {"op_count": sum(ops.values()), "op_histogram": dict(sorted(ops.items())), "opset": opset}


def onnx_target(ctx: ExportContext) -> dict:
    path = export_onnx(ctx.built.model, ctx.built.input_hw, ctx.out_dir / f"{ctx.stem}.onnx")
    ctx.files["onnx"] = path
    return artifact_entry(ctx, path, "onnx", precision="fp32", runtime="onnxruntime", **graph_summary(path))


def export_onnx_dynamic(model: nn.Module, input_hw: tuple[int, int], path: str | Path, opset: int = OPSET) -> Path:
    """The input's H and W symbolic (``14*grid_h`` x ``14*grid_w``); ``input_hw`` is the sample the exporter traces
    with, recorded in the file's metadata as the shape runners use when none is given. A prompted model's prompt
    (second input) has its h and w symbolic too, its traced shape recorded the same way."""
    import onnx
    from torch.export import Dim

    from ..quiet import native_stderr_muted

    grid_h, grid_w = Dim("grid_h", min=1, max=MAX_GRID), Dim("grid_w", min=1, max=MAX_GRID)
    samples, shapes = (torch.zeros(1, 3, *input_hw),), {"x": {2: PATCH * grid_h, 3: PATCH * grid_w}}
    props = {DEFAULT_HW_KEY: f"{input_hw[0]}x{input_hw[1]}"}
    prompt_hw = getattr(model, "prompt_hw", None)
    if prompt_hw:
        from ..models.prompt_depth_anything import sample_prompt

        samples += (sample_prompt(prompt_hw),)
        shapes["prompt"] = {2: Dim("prompt_h", min=2, max=MAX_PROMPT_SIDE), 3: Dim("prompt_w", min=2, max=MAX_PROMPT_SIDE)}
        props[DEFAULT_PROMPT_HW_KEY] = f"{prompt_hw[0]}x{prompt_hw[1]}"
    with native_stderr_muted():
        program = torch.onnx.export(model.eval(), samples, dynamo=True, opset_version=opset, optimize=True,
                                    verbose=False, input_names=[INPUT_NAME, PROMPT_NAME][: len(samples)],
                                    output_names=[OUTPUT_NAME], external_data=False, dynamic_shapes=shapes)
    proto = program.model_proto
    onnx.helper.set_model_props(proto, props)
    onnx.checker.check_model(proto)
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(proto.SerializeToString())
    return path


def dynamic_shapes(input_hw: tuple[int, int]) -> list[tuple[int, int]]:
    """The shapes a dynamic export is verified at: its own, the square of its short side, and a wider, shorter one
    (3/4 of the height, one patch wider): 518x686 -> 518x686, 518x518, 392x700; 56x70 -> 56x70, 56x56, 42x84."""
    h, w = input_hw
    wide = (max(PATCH, round(0.75 * h / PATCH) * PATCH), w + PATCH)
    return list(dict.fromkeys([(h, w), (min(h, w), min(h, w)), wide]))


def onnx_dynamic_target(ctx: ExportContext) -> dict:
    """One .onnx taking any H x W (multiples of 14): the same weights and shape-free rewrites as the export, with
    the position embedding resampled and the resizes sized at run time (``export.dynamic``)."""
    from ..build import build
    from ..errors import InputError
    from .dynamic import SHAPE_BOUND, DynamicDA2

    b = ctx.built
    names = [r for r in b.rewrites if r not in SHAPE_BOUND]
    try:
        model = DynamicDA2(build(b.spec, b.input_hw, b.weights, rewrites=names, pos_formula=b.pos_formula,
                                 prompt_hw=b.prompt_hw).model)
    except TypeError:
        raise InputError(f"--targets onnx-dynamic: only relative Depth Anything V2 and Prompt Depth Anything models "
                         f"have a dynamic-shape form so far, and {b.spec.id} is not one") from None
    path = export_onnx_dynamic(model, b.input_hw, ctx.out_dir / f"{ctx.stem}_dynamic.onnx")
    ctx.files["onnx-dynamic"] = path
    shapes = [list(hw) for hw in (ctx.options.dynamic_shapes or dynamic_shapes(b.input_hw))]
    return artifact_entry(ctx, path, "onnx-dynamic", precision="fp32", runtime="onnxruntime",
                          input_dims=[1, 3, f"{PATCH}*grid_h", f"{PATCH}*grid_w"], verify_shapes=shapes,
                          dynamic_rewrites=names, **graph_summary(path))
