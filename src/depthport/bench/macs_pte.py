"""MACs of an ExecuTorch .pte, counted from its XNNPACK-delegated graphs.

Each XNNPACK delegate payload (XNNHeader + an XNNGraph flatbuffer, executorch/backends/xnnpack/serialization/
schema.fbs) is decoded with the flatc that ships in the executorch wheel, and its nodes are counted on the
static tensor dims it stores (XNNPACK tensors are NHWC):

- XNNFullyConnected: output elements x K (K = the input's last dim)
- XNNConv2d / XNNDepthwiseConv2d: output elements x kernel H x kernel W x group input channels
- XNNConvTranspose2d: input elements x kernel H x kernel W x group output channels
- XNNBatchMatrixMultiply: output elements x K (K = the first input's last dim)
- XNNScaledDotProductAttention: B x H x L x S x (D + Dv)

Matrix products left to ExecuTorch's portable kernels (aten::mm, bmm, addmm, baddbmm) are counted from the
tensor sizes in the program (output elements x the first operand's last dim) under their aten name. Other
delegates (Core ML) and other portable MAC kernels (convolution) are opaque here and listed under "uncounted";
a file with neither an XNNPACK delegate nor a counted portable kernel is "not counted".
Reads private helpers of executorch 1.5.1 (``exir._serialize``); a different version may make the graph
unreadable, which ``count_macs`` reports as not counted.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections import defaultdict
from pathlib import Path

from ..scratch import process_folder

CONV = ("XNNConv2d", "XNNDepthwiseConv2d")
OP_NAMES = {"XNNFullyConnected": "FULLY_CONNECTED", "XNNConv2d": "CONV_2D", "XNNDepthwiseConv2d": "DEPTHWISE_CONV_2D",
            "XNNConvTranspose2d": "TRANSPOSE_CONV", "XNNBatchMatrixMultiply": "BATCH_MATMUL",
            "XNNScaledDotProductAttention": "SDPA"}
PORTABLE_MAC_KERNELS = re.compile(r"aten::(mm|addmm|bmm|baddbmm|matmul|linear|convolution|conv\w*)\b")
# portable kernel -> index of its first matrix operand among the KernelCall args (the output is the last arg)
PORTABLE_COUNTED = {"aten::mm": 0, "aten::bmm": 0, "aten::addmm": 1, "aten::baddbmm": 1}
_SCALAR = {6: "FLOAT32", 5: "FLOAT16", 1: "INT8", 0: "UINT8"}  # executorch ScalarType values
_DTYPE = {"xnn_datatype_fp32": "FLOAT32", "xnn_datatype_fp16": "FLOAT16", "xnn_datatype_qint8": "INT8",
          "xnn_datatype_quint8": "UINT8", "xnn_datatype_qcint8": "INT8", "xnn_datatype_qdint8": "INT8",
          "xnn_datatype_qcint4": "INT4", "xnn_datatype_qbint4": "INT4", "xnn_datatype_qpint8": "INT8"}


def _graph_json(flatbuffer: bytes) -> dict:
    import importlib.resources

    import executorch.backends.xnnpack.serialization as serialization
    from executorch.exir._serialize._flatbuffer import _flatc_decompile

    with tempfile.TemporaryDirectory(prefix="pte-", dir=process_folder()) as tmp:
        schema, data = Path(tmp) / "schema.fbs", Path(tmp) / "graph.bin"
        schema.write_bytes(importlib.resources.files(serialization).joinpath("schema.fbs").read_bytes())
        data.write_bytes(flatbuffer)
        _flatc_decompile(tmp, str(schema), str(data))
        text = (Path(tmp) / "graph.json").read_text()
    # flatc writes non-finite floats (clamp bounds) as bare inf / nan, which JSON has no literal for
    return json.loads(re.sub(r"(?<=[\s:\[,])(-?)(inf|nan)\b", lambda m: '"' + m.group(1) + m.group(2) + '"', text))


def _values(graph: dict) -> dict[int, tuple[tuple[int, ...], str]]:
    """value id -> (dims, dtype name)."""
    out = {}
    for v in graph.get("xvalues", []):
        body = v["xvalue_union"]
        tensor = body.get("tensor_value", body)
        out[int(tensor["id_out"])] = (tuple(int(d) for d in tensor.get("dims") or ()),
                                      _DTYPE.get(tensor.get("datatype"), str(tensor.get("datatype"))))
    return out


def node_macs(kind: str, node: dict, values: dict) -> tuple[int, str, str] | None:
    """(MACs, activation dtype, weight dtype) of one XNNPACK node; None when it is not a MAC node."""
    dims = lambda key: values[int(node[key])][0]  # noqa: E731
    dtype = lambda key: values[int(node[key])][1]  # noqa: E731
    if kind == "XNNFullyConnected":
        return math.prod(dims("output_id")) * dims("input1_id")[-1], dtype("input1_id"), dtype("filter_id")
    taps = node.get("kernel_height", 0) * node.get("kernel_width", 0)
    if kind in CONV:
        macs = math.prod(dims("output_id")) * taps * node["group_input_channels"]
        return macs, dtype("input1_id"), dtype("filter_id")
    if kind == "XNNConvTranspose2d":
        macs = math.prod(dims("input1_id")) * taps * node["group_output_channels"]
        return macs, dtype("input1_id"), dtype("filter_id")
    if kind == "XNNBatchMatrixMultiply":
        return math.prod(dims("output_id")) * dims("input1_id")[-1], dtype("input1_id"), dtype("input2_id")
    if kind == "XNNScaledDotProductAttention":
        q, k, v = dims("query_id"), dims("key_id"), dims("value_id")
        return math.prod(q[:-1]) * k[-2] * (q[-1] + v[-1]), dtype("query_id"), dtype("key_id")
    return None


def _portable_calls(program) -> list[tuple[str, list]]:
    """(operator name, [Tensor or None per arg]) of every portable KernelCall of the program."""
    calls = []
    for plan in program.execution_plan:
        for chain in plan.chains:
            for instruction in chain.instructions:
                call = instruction.instr_args
                if type(call).__name__ != "KernelCall":
                    continue
                args = [plan.values[i].val if hasattr(plan.values[i].val, "sizes") else None for i in call.args]
                calls.append((plan.operators[call.op_index].name, args))
    return calls


def portable_macs(name: str, args: list) -> tuple[int, str] | None:
    """(MACs, dtype) of a portable matrix-product kernel call (None: not one, or its sizes are unknown)."""
    first = PORTABLE_COUNTED.get(name)
    if first is None or len(args) <= first or args[first] is None or args[-1] is None:
        return None
    a, out = args[first], args[-1]
    return math.prod(int(d) for d in out.sizes) * int(a.sizes[-1]), _SCALAR.get(int(a.scalar_type), "?")


def _delegate_payloads(data: bytes) -> tuple[list[bytes], list[str], list]:
    """(XNNPACK payloads, ids of the other delegates, portable kernel calls)."""
    from executorch.exir._serialize._program import (_extract_delegate_payload, _flatbuffer_to_program,
                                                     _get_extended_header)

    header = _get_extended_header(data)
    program = _flatbuffer_to_program(data[:header.program_size] if header and header.is_valid() else data)
    others = [d.id for plan in program.execution_plan for d in plan.delegates if "xnnpack" not in d.id.lower()]
    payloads = []
    while (payload := _extract_delegate_payload(data, "xnnpack", len(payloads))) is not None:
        payloads.append(payload)
    return payloads, others, _portable_calls(program)


def count_pte(path: str | Path) -> dict:
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader

    from .macs_common import _result, not_counted, precision_class

    payloads, others, portable = _delegate_payloads(Path(path).read_bytes())
    by_op: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    by_precision: dict[str, int] = defaultdict(int)
    uncounted = [f"delegate {d}: payload not readable here" for d in others]
    for name, args in portable:
        found = portable_macs(name, args)
        if found is None:
            if PORTABLE_MAC_KERNELS.search(name):
                uncounted.append(f"portable kernel {name}: not counted")
            continue
        by_op[name] += found[0]
        count[name] += 1
        by_precision[precision_class(found[1], found[1])] += found[0]
    if not payloads and not by_op:
        return not_counted(f"no XNNPACK delegate in the file (delegates: {', '.join(others) or 'none'})")
    for payload in payloads:
        header = XNNHeader.from_bytes(payload[:XNNHeader.EXPECTED_LENGTH])
        graph = _graph_json(payload[header.flatbuffer_offset:header.flatbuffer_offset + header.flatbuffer_size])
        values = _values(graph)
        for node in graph.get("xnodes", []):
            kind = node["xnode_union_type"]
            found = node_macs(kind, node["xnode_union"], values) if kind in OP_NAMES else None
            if found is None:
                continue
            macs, act, weight = found
            by_op[OP_NAMES[kind]] += macs
            count[OP_NAMES[kind]] += 1
            by_precision[precision_class(act, weight)] += macs
    return _result(f"pte: {len(payloads)} XNNPACK delegate graph(s) decoded with executorch's flatc, portable "
                   "matrix-product kernels from the program's tensor sizes", by_op, count, by_precision, uncounted)
