"""ONNX target: torch.onnx.export (dynamo exporter) of the re-authored model, one self-contained file."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import torch
from torch import nn

from ..atomic import atomic_path
from .context import ExportContext, artifact_entry

OPSET = 18
INPUT_NAME, OUTPUT_NAME = "image", "depth"


def export_onnx(model: nn.Module, input_hw: tuple[int, int], path: str | Path, opset: int = OPSET) -> Path:
    """Static-shape export with weights embedded (no external data; fine below ONNX's 2 GB protobuf limit)."""
    import onnx

    from ..quiet import native_stderr_muted

    sample = torch.zeros(1, 3, *input_hw)
    with native_stderr_muted():
        program = torch.onnx.export(model.eval(), (sample,), dynamo=True, opset_version=opset, optimize=True,
                                    verbose=False, input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                                    external_data=False)
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
