"""Multiply-accumulates of an exported file, counted from its graph, per op type.

One MAC is one multiply-add of a matrix product or convolution; the element-wise ops (adds, norms, softmax,
activations) are not counted. Formulas, on the static shapes stored in the file:

- FULLY_CONNECTED: output elements x K (K = weights' last dim)
- CONV_2D: output elements x KH x KW x (input channels per group)
- DEPTHWISE_CONV_2D: output elements x KH x KW
- BATCH_MATMUL: output elements x K (K = the shared dim of the first operand, adj_x honoured)
- TRANSPOSE_CONV: input elements x KH x KW x output channels (each input value is scattered once per tap)

.tflite: the main subgraph via ``check.tflite_graph.read_graph``. .onnx: the main graph after ONNX shape
inference (MatMul, Gemm, Conv, ConvTranspose and their integer forms). .pte: the XNNPACK-delegated graphs
(see ``depthport.bench.macs_pte``); files whose graph cannot be read are reported as not counted, with why.

Each MAC is also filed under a precision class from the dtypes feeding the op: ``fp32`` (float activations,
float weights), ``int8_dynamic`` (float activations, INT8 weights: quantized at run time), ``int8`` (INT8
activations and weights), or the two dtypes joined for anything else.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from .macs_common import _result, not_counted, precision_class

MAC_OPS_TFLITE = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D", "BATCH_MATMUL", "TRANSPOSE_CONV")
MAC_OPS_ONNX = ("MatMul", "Gemm", "Conv", "ConvTranspose", "MatMulInteger", "QLinearMatMul", "ConvInteger",
                "QLinearConv")


def _prod(shape) -> int:
    return math.prod(int(d) for d in shape)


def tflite_op_macs(op) -> int | None:
    """MACs of one ``tflite_graph.OpInfo`` (None: not a MAC op, or a shape unknown)."""
    if op.name not in MAC_OPS_TFLITE or not op.outputs:
        return None
    ins, out = op.inputs, op.outputs[0]
    shapes = [t.shape for t in ins if t is not None] + [out.shape]
    if any(d < 0 for s in shapes for d in s) or len(ins) < 2 or ins[1] is None:
        return None
    w = ins[1].shape
    if op.name == "FULLY_CONNECTED":
        return _prod(out.shape) * int(w[-1])
    if op.name == "CONV_2D":
        return _prod(out.shape) * int(w[1]) * int(w[2]) * int(w[3])
    if op.name == "DEPTHWISE_CONV_2D":
        return _prod(out.shape) * int(w[1]) * int(w[2])
    if op.name == "BATCH_MATMUL":
        a = ins[0].shape
        return _prod(out.shape) * int(a[-2] if op.options.get("adjX") else a[-1])
    # TRANSPOSE_CONV: (output_shape, weights [OC, KH, KW, IC], input [N, H, W, IC], bias?)
    if len(ins) < 3 or ins[2] is None:
        return None
    return _prod(ins[2].shape) * int(w[0]) * int(w[1]) * int(w[2])


def _tflite_precision(op) -> str:
    ins = op.inputs
    if op.name == "TRANSPOSE_CONV":
        act, weight = ins[2], ins[1]
    else:
        act, weight = ins[0], ins[1]
    return precision_class(act.dtype, weight.dtype)


def count_tflite(path: str | Path) -> dict:
    from ..core.tflite_graph import read_graph

    graph = read_graph(path)
    by_op: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    by_precision: dict[str, int] = defaultdict(int)
    uncounted = []
    for op in graph.ops:
        if op.name not in MAC_OPS_TFLITE:
            continue
        macs = tflite_op_macs(op)
        if macs is None:
            uncounted.append(f"{op.index} {op.name} ({op.describe_shapes()})")
            continue
        by_op[op.name] += macs
        count[op.name] += 1
        by_precision[_tflite_precision(op)] += macs
    extra = [f"subgraphs 1..{graph.subgraph_count - 1} not counted"] if graph.subgraph_count > 1 else []
    return _result("tflite main subgraph (check.tflite_graph)", by_op, count, by_precision, uncounted + extra)


def _onnx_shapes(graph) -> dict[str, tuple[int, ...] | None]:
    shapes: dict[str, tuple[int, ...] | None] = {}
    for init in graph.initializer:
        shapes[init.name] = tuple(int(d) for d in init.dims)
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        shapes[vi.name] = tuple(dims) if all(d >= 0 for d in dims) else None
    return shapes


def _onnx_dtypes(graph) -> dict[str, str]:
    import onnx

    names = {}
    for init in graph.initializer:
        names[init.name] = onnx.TensorProto.DataType.Name(init.data_type)
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        names[vi.name] = onnx.TensorProto.DataType.Name(vi.type.tensor_type.elem_type)
    return {k: "FLOAT32" if v == "FLOAT" else v for k, v in names.items()}


def onnx_node_macs(node, shapes: dict) -> int | None:
    """MACs of one ONNX node from inferred shapes (None: not a MAC op or a shape unknown)."""
    op = node.op_type
    attrs = {a.name: a.i for a in node.attribute}
    w_index = 3 if op.startswith("QLinear") else 1
    names = list(node.input)
    if op not in MAC_OPS_ONNX or len(names) <= w_index:
        return None
    a, w, y = shapes.get(names[0]), shapes.get(names[w_index]), shapes.get(node.output[0])
    if a is None or w is None or y is None:
        return None
    if op in ("MatMul", "MatMulInteger", "QLinearMatMul"):
        return _prod(y) * int(a[-1])
    if op == "Gemm":
        return _prod(y) * int(a[0] if attrs.get("transA") else a[1])
    if op in ("Conv", "ConvInteger", "QLinearConv"):
        return _prod(y) * _prod(w[1:])
    return _prod(a) * _prod(w[1:])  # ConvTranspose: W [C_in, C_out/group, k...]


def count_onnx(path: str | Path) -> dict:
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    graph = model.graph
    shapes, dtypes = _onnx_shapes(graph), _onnx_dtypes(graph)
    by_op: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    by_precision: dict[str, int] = defaultdict(int)
    uncounted = []
    local = {f.name for f in model.functions}
    for node in graph.node:
        if node.op_type in local:
            uncounted.append(f"{node.name or node.op_type}: local function {node.op_type}")
        if node.op_type not in MAC_OPS_ONNX:
            continue
        macs = onnx_node_macs(node, shapes)
        if macs is None:
            uncounted.append(f"{node.name or node.op_type}: shape unknown")
            continue
        by_op[node.op_type] += macs
        count[node.op_type] += 1
        w_name = node.input[3 if node.op_type.startswith("QLinear") else 1]
        by_precision[precision_class(dtypes.get(node.input[0], "?"), dtypes.get(w_name, "?"))] += macs
    return _result("onnx main graph after onnx.shape_inference", by_op, count, by_precision, uncounted)


def count_macs(path: str | Path) -> dict:
    """{"counted", "total", "gmac", "by_op", "op_count", "by_precision", "method", "uncounted"} of a file;
    {"counted": False, "reason"} when its graph cannot be read."""
    path = Path(path)
    try:
        if path.suffix == ".tflite":
            return count_tflite(path)
        if path.suffix == ".onnx":
            return count_onnx(path)
        if path.suffix == ".pte":
            from .macs_pte import count_pte

            return count_pte(path)
    except Exception as exc:  # a graph we cannot read: say so beside the latency, do not fail the bench
        return not_counted(f"graph not readable: {exc.__class__.__name__}: {str(exc).splitlines()[0][:200]}")
    return not_counted(f"no MAC counter for {path.suffix} files")
