"""Mobile GPU delegate rules as data: each rule says what it checks, how bad it is and where it comes from.

Targets: the LiteRT GPU accelerator (ML Drift: OpenCL / WebGPU / Metal) first, the legacy TFLite GPU
delegate second. Severities:

- ``error``: the op will not be delegated, or is known to compute wrong / fail to compile, on the
  target. Device bans reported from a Pixel 8a (TRANSPOSE_CONV, RESIZE_BILINEAR align_corners=True)
  are errors on purpose although the ML Drift source accepts them: that device class is our target,
  and an exact rewrite exists for both.
- ``warning``: only the legacy delegate, one backend (OpenGL) or some GPUs reject it, or it may cost
  a kernel; the model can still be fully delegated by the LiteRT accelerator.

To add a rule, write a check ``(op, graph) -> detail | None`` and append a ``Rule`` to ``RULES``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal

from depthport.core.tflite_graph import Graph, OpInfo, TensorInfo

Severity = Literal["error", "warning"]

ML_DRIFT = "ml_drift_delegate/tflite/support/support.cc"
ML_DRIFT_ELEMENTWISE = "ml_drift_delegate/tflite/support/support_elementwise.cc"
ML_DRIFT_RESIZE = "ml_drift_delegate/tflite/support/support_resize2d.cc"
ML_DRIFT_BMM = "ml_drift_delegate/tflite/support/support_batch_matmul.cc"
ML_DRIFT_OPS = "ml_drift_delegate/tflite/support/support_<op>.cc"
LEGACY = "tflite/tools/versioning/gpu_compatibility.cc"
PIXEL_8A = "device report: Pixel 8a"
WEBGPU_2_3 = "runtime report: ai-edge-litert 2.3.0 WebGPU accelerator"

# Ops the ML Drift dispatch (IsNodeSupported) accepts, with the highest op version it accepts
# (None: no version bound in the dispatch itself).
ML_DRIFT_DISPATCH: dict[str, int | None] = {
    "ABS": 5, "ADD": 6, "ARG_MAX": None, "ATAN2": 2, "AVERAGE_POOL_2D": None, "BATCH_MATMUL": None,
    "BITCAST": None, "BITWISE_XOR": 2, "CAST": 7, "CEIL": 2, "CONCATENATION": None, "CONV_2D": None,
    "COS": 2, "CUMSUM": None, "CUSTOM": None, "DEPTH_TO_SPACE": None, "DEPTHWISE_CONV_2D": None,
    "DEQUANTIZE": None, "DIV": 2, "DYNAMIC_UPDATE_SLICE": None, "ELU": 2, "EMBEDDING_LOOKUP": None,
    "EQUAL": 2, "EXP": 2, "FLOOR": 2, "FLOOR_DIV": 3, "FLOOR_MOD": 2, "FULLY_CONNECTED": None,
    "GATHER": None, "GELU": 3, "GREATER": 2, "GREATER_EQUAL": 2, "HARD_SWISH": 1, "LEAKY_RELU": 2,
    "LESS": 2, "LESS_EQUAL": 2, "LOG": 2, "LOGICAL_AND": 2, "LOGICAL_NOT": 2, "LOGICAL_OR": 2,
    "LOGISTIC": 2, "MAX_POOL_2D": None, "MAXIMUM": 4, "MEAN": None, "MINIMUM": 4, "MIRROR_PAD": None,
    "MUL": 8, "NEG": 2, "NOT_EQUAL": 2, "ONE_HOT": None, "PACK": None, "PAD": None, "PADV2": None,
    "POW": 2, "PRELU": 1, "QUANTIZE": None, "REDUCE_ALL": None, "REDUCE_ANY": None, "REDUCE_MAX": None,
    "REDUCE_MIN": None, "REDUCE_PROD": None, "RELU": 2, "RELU6": 2, "RELU_N1_TO_1": 2, "RESHAPE": None,
    "RESIZE_BILINEAR": 3, "RESIZE_NEAREST_NEIGHBOR": 3, "REVERSE_V2": None, "RIGHT_SHIFT": 1,
    "ROUND": 2, "RSQRT": 2, "SELECT": None, "SELECT_V2": None, "SIGN": 2, "SIN": 2, "SLICE": None,
    "SOFTMAX": 4, "SPACE_TO_DEPTH": None, "SPLIT": None, "SPLIT_V": None, "SQRT": 2, "SQUARE": 2,
    "SQUARED_DIFFERENCE": 2, "STABLEHLO_BROADCAST_IN_DIM": None, "STABLEHLO_CBRT": 1,
    "STABLEHLO_CLAMP": None, "STABLEHLO_COMPOSITE": None, "STABLEHLO_REMAINDER": 1,
    "STABLEHLO_SHIFT_LEFT": 1, "STRIDED_SLICE": None, "SUB": 3, "SUM": None, "TANH": 2, "TILE": None,
    "TOPK_V2": None, "TRANSPOSE": None, "TRANSPOSE_CONV": None, "UNPACK": None,
}

# Unsupported ops that show up in depth-model exports, with what to do instead.
UNSUPPORTED_OPS: dict[str, str] = {
    "GATHER_ND": "not dispatched (index with GATHER on 1-D int32 indices, or bake the result)",
    "BROADCAST_TO": "not dispatched (only STABLEHLO_BROADCAST_IN_DIM is; rely on implicit broadcasting)",
    "SCATTER_ND": "not dispatched (rewrite as CONCATENATION / SELECT_V2 of static slices)",
}

# CUSTOM and STABLEHLO_COMPOSITE ops the dispatch knows by name.
ML_DRIFT_CUSTOM = frozenset({
    "Convolution2DTransposeBias", "MaxPoolingWithArgmax2D", "custom_call.MaxUnpooling2D", "Resampler",
    "custom_call.absolute_positional_embedding", "custom_call.pixel_shuffle",
    "custom_call.rotary_positional_embedding",
})
ML_DRIFT_COMPOSITES = frozenset({"odml.group_norm", "odml.rms_norm", "odml.scaled_dot_product_attention"})

BINARY_ELEMENTWISE = frozenset({
    "ADD", "SUB", "MUL", "DIV", "POW", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "FLOOR_DIV",
    "FLOOR_MOD", "ATAN2", "EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL",
    "LOGICAL_AND", "LOGICAL_OR", "BITWISE_XOR", "RIGHT_SHIFT", "STABLEHLO_REMAINDER",
    "STABLEHLO_SHIFT_LEFT",
})
UNARY_ELEMENTWISE = frozenset({
    "ABS", "CAST", "CEIL", "COS", "ELU", "EXP", "FLOOR", "GELU", "HARD_SWISH", "LOG", "LOGISTIC",
    "NEG", "ROUND", "RSQRT", "SIGN", "SIN", "SQRT", "SQUARE", "TANH", "LOGICAL_NOT", "STABLEHLO_CBRT",
})
REDUCTIONS = frozenset({"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL"})
RESIZES = frozenset({"RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"})

# Ops whose first (data) input must be produced at run time.
RUNTIME_INPUT_REQUIRED = UNARY_ELEMENTWISE | REDUCTIONS | RESIZES | {"SOFTMAX", "BATCH_MATMUL"}

# (min rank of the data input/output, max rank of every tensor); ops not listed: (0, 4).
RANK_LIMITS: dict[str, tuple[int, int]] = {
    "CONV_2D": (4, 4), "DEPTHWISE_CONV_2D": (4, 4), "RESHAPE": (0, 5), "CONCATENATION": (0, 5),
    "TILE": (0, 5), "UNPACK": (0, 5), "SLICE": (0, 5), "BATCH_MATMUL": (2, 5),
    "STABLEHLO_BROADCAST_IN_DIM": (0, 5),
}
DEFAULT_RANK_LIMIT = (0, 4)


@dataclasses.dataclass(frozen=True)
class Rule:
    """One delegate rule; `check` returns a detail string when `op` breaks it."""

    id: str
    severity: Severity
    source: str
    summary: str
    check: Callable[[OpInfo, Graph], str | None]
    ops: frozenset[str] | None = None

    def applies_to(self, op: OpInfo) -> bool:
        return self.ops is None or op.name in self.ops


def _dims(t: TensorInfo) -> str:
    return "[" + ",".join(str(d) for d in t.shape) + "]"


def _broadcastable(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(a), reversed(b)))


def _weights(op: OpInfo) -> TensorInfo | None:
    return op.inputs[1] if len(op.inputs) > 1 else None


def check_unsupported_op(op: OpInfo, graph: Graph) -> str | None:
    if op.name in UNSUPPORTED_OPS:
        return UNSUPPORTED_OPS[op.name]
    if op.name not in ML_DRIFT_DISPATCH:
        return f"{op.name} is not in the ML Drift op dispatch; it would run on the CPU"
    if op.name == "CUSTOM" and op.options.get("custom_code") not in ML_DRIFT_CUSTOM:
        return f"custom op '{op.options.get('custom_code')}' is not known to ML Drift"
    if op.name == "STABLEHLO_COMPOSITE" and op.options.get("name") not in ML_DRIFT_COMPOSITES:
        return f"composite '{op.options.get('name')}' is not known to ML Drift"
    return None


def check_op_version(op: OpInfo, graph: Graph) -> str | None:
    limit = ML_DRIFT_DISPATCH.get(op.name)
    if limit is not None and op.version > limit:
        return f"op version {op.version} > supported {limit}"
    return None


def check_rank(op: OpInfo, graph: Graph) -> str | None:
    low, high = RANK_LIMITS.get(op.name, DEFAULT_RANK_LIMIT)
    too_big = [t for t in (*op.present_inputs, *op.outputs) if t.rank > high]
    if too_big:
        return f"{too_big[0].rank}D tensor {_dims(too_big[0])}; {op.name} supports at most {high}D"
    data = [t for t in (op.inputs[:1] + op.outputs[:1]) if t is not None]
    too_small = [t for t in data if t.rank < low]
    if too_small:
        return f"{too_small[0].rank}D tensor {_dims(too_small[0])}; {op.name} needs {low}D"
    return None


def check_5d_webgpu(op: OpInfo, graph: Graph) -> str | None:
    big = [t for t in (*op.present_inputs, *op.outputs) if t.rank >= 5]
    if big and RANK_LIMITS.get(op.name, DEFAULT_RANK_LIMIT)[1] >= 5:
        return f"5D tensor {_dims(big[0])}: 'Tensor dimensions must be less than 5' on the WebGPU accelerator"
    return None


def check_broadcast(op: OpInfo, graph: Graph) -> str | None:
    ins = op.present_inputs
    if len(ins) == 2 and not _broadcastable(ins[0].shape, ins[1].shape):
        return f"inputs {_dims(ins[0])} and {_dims(ins[1])} are not broadcastable"
    return None


def _legacy_broadcast_ok(longer: tuple[int, ...], shorter: tuple[int, ...]) -> bool:
    if len(longer) != 4:
        return False
    if len(shorter) == 3:
        return longer[0] == 1
    return len(shorter) == 2 and (shorter == (1, 1) and longer[0] == 1
                                  or (shorter[0] == longer[0] and shorter[1] == longer[3]))


def check_legacy_broadcast(op: OpInfo, graph: Graph) -> str | None:
    ins = op.present_inputs
    if len(ins) != 2:
        return None
    a, b = sorted((ins[0].shape, ins[1].shape), key=len, reverse=True)
    if len(b) > 1 and len(a) != len(b) and not _legacy_broadcast_ok(a, b):
        return f"legacy delegate broadcasts only 4Dx3D (batch 1), 4Dx[1,1], 4Dx[b,c]; got {list(a)} x {list(b)}"
    return None


def check_all_constant(op: OpInfo, graph: Graph) -> str | None:
    ins = op.present_inputs
    if ins and all(t.is_constant for t in ins):
        return "all inputs are constant (fold it at export time)"
    return None


def check_constant_input(op: OpInfo, graph: Graph) -> str | None:
    data = op.inputs[0] if op.inputs else None
    if data is not None and data.is_constant:
        return f"input 0 {data.describe()} is constant; {op.name} needs a runtime input"
    return None


def check_bmm_constant_rhs(op: OpInfo, graph: Graph) -> str | None:
    rhs = _weights(op)
    if rhs is not None and rhs.is_constant and rhs.rank not in (2, 3, 4):
        return f"constant right-hand side must be 2-4D, got {rhs.rank}D"
    return None


def check_bmm_broadcast_batch(op: OpInfo, graph: Graph) -> str | None:
    lhs, rhs = op.inputs[0], op.inputs[1] if len(op.inputs) > 1 else None
    if lhs is None or rhs is None:
        return None
    lhs_batch, rhs_batch = math.prod(lhs.shape[:-2]), math.prod(rhs.shape[:-2])
    if lhs_batch != rhs_batch:
        return f"batch dims broadcast: lhs {list(lhs.shape)} vs rhs {list(rhs.shape)}"
    return None


def check_rank2_constant_operand(op: OpInfo, graph: Graph) -> str | None:
    present = [t for t in op.inputs if t is not None]
    consts = [t for t in present if t.is_constant and t.rank == 2 and t.shape[0] > 1]
    if consts and any(not t.is_constant and t.rank == 2 for t in present):
        return f"rank-2 constant operand {list(consts[0].shape)} (add it at rank 3-4, or fold it into a weight)"
    return None


def check_resize_align_half(op: OpInfo, graph: Graph) -> str | None:
    if op.options.get("alignCorners") and op.options.get("halfPixelCenters"):
        return "align_corners=True with half_pixel_centers=True"
    return None


def check_resize_align_corners(op: OpInfo, graph: Graph) -> str | None:
    if op.options.get("alignCorners") and not op.options.get("halfPixelCenters"):
        return "align_corners=True is rejected on device (use two constant matmuls, exact)"
    return None


def check_transpose_conv(op: OpInfo, graph: Graph) -> str | None:
    if op.name == "CUSTOM" and op.options.get("custom_code") != "Convolution2DTransposeBias":
        return None
    return "transposed convolution is rejected on device (kernel=stride: 1x1 conv + depth-to-space, exact)"


def check_select_shapes(op: OpInfo, graph: Graph) -> str | None:
    if len(op.inputs) != 3 or not op.outputs:
        return "expects 3 inputs and 1 output"
    out = op.outputs[0].shape
    for name, t in (("true branch", op.inputs[1]), ("false branch", op.inputs[2])):
        if t is not None and t.shape != out and t.shape not in ((), (1,)):
            return f"{name} {_dims(t)} is neither the output shape {list(out)} nor a scalar"
    return None


def check_gather_indices(op: OpInfo, graph: Graph) -> str | None:
    idx = _weights(op)
    if idx is None:
        return "missing indices"
    if idx.rank != 1 or idx.dtype != "INT32":
        return f"indices {idx.describe()} must be 1-D INT32"
    return None


def check_bool_tensor(op: OpInfo, graph: Graph) -> str | None:
    bools = [t for t in (*op.present_inputs, *op.outputs) if t.dtype == "BOOL"]
    if bools:
        return f"BOOL tensor {bools[0].describe()} (no bool on OpenGL; ML Drift only with allow_bool_tensors)"
    return None


def check_dynamic_shape(op: OpInfo, graph: Graph) -> str | None:
    dyn = [t for t in (*op.present_inputs, *op.outputs) if t.is_dynamic]
    if dyn:
        return f"dynamic shape {list(dyn[0].shape_signature)} on tensor '{dyn[0].name}'"
    return None


def check_cast(op: OpInfo, graph: Graph) -> str | None:
    src = op.inputs[0].dtype if op.inputs and op.inputs[0] else "?"
    dst = op.outputs[0].dtype if op.outputs else "?"
    return f"CAST {src} -> {dst} (legacy delegate: bool<->float and float32<->int32 only; costs a kernel)"


def check_legacy_slice_rank(op: OpInfo, graph: Graph) -> str | None:
    data = op.inputs[0] if op.inputs else None
    if data is not None and data.rank not in (3, 4):
        return f"{data.rank}D input; the legacy delegate slices 3D or 4D tensors only"
    return None


def check_legacy_softmax_beta(op: OpInfo, graph: Graph) -> str | None:
    beta = op.options.get("beta", 1.0)
    return None if beta == 1.0 else f"beta={beta} (legacy delegate needs beta=1)"


def _is_int8_weight(t: TensorInfo | None) -> bool:
    return t is not None and t.is_constant and t.is_quantized and t.dtype in ("INT8", "INT4", "UINT8")


def _dequantized_from(op: OpInfo, graph: Graph) -> list[tuple[TensorInfo, OpInfo]]:
    pairs = [(t, graph.producer(t)) for t in op.present_inputs]
    return [(t, p) for t, p in pairs if p is not None and p.name == "DEQUANTIZE"]


def check_fc_dynamic_range_rank3_add(op: OpInfo, graph: Graph) -> str | None:
    data, weights = op.inputs[0], _weights(op)
    if data is None or data.dtype != "FLOAT32" or data.rank != 3 or not _is_int8_weight(weights):
        return None
    if any(c.name == "ADD" for out in op.outputs for c in graph.consumers(out)):
        return "dynamic-range INT8 FULLY_CONNECTED on a rank-3 input followed by ADD"
    return None


def check_fc_weight_only_int8(op: OpInfo, graph: Graph) -> str | None:
    for t, deq in _dequantized_from(op, graph):
        if deq.inputs and _is_int8_weight(deq.inputs[0]):
            return f"weight-only INT8: input {t.describe()} is DEQUANTIZE of {deq.inputs[0].describe()}"
    return None


def check_fc_dequantize_input(op: OpInfo, graph: Graph) -> str | None:
    for t, deq in _dequantized_from(op, graph):
        if not (deq.inputs and _is_int8_weight(deq.inputs[0])):
            return f"input {t.describe()} comes from an explicit DEQUANTIZE (op {deq.index})"
    return None


RULES: tuple[Rule, ...] = (
    Rule("unsupported-op", "error", ML_DRIFT, "op is not dispatched to the GPU", check_unsupported_op),
    Rule("op-version", "error", ML_DRIFT, "op version above the supported maximum", check_op_version),
    Rule("rank", "error", ML_DRIFT_OPS, "tensor rank outside the op's limits", check_rank),
    Rule("rank-5d-webgpu", "warning", WEBGPU_2_3,
         "5D tensors rejected by the WebGPU accelerator although ML Drift allows them", check_5d_webgpu),
    Rule("dynamic-shape", "error", "depthport policy: GPU programs are compiled for static shapes",
         "tensor with an unknown dimension", check_dynamic_shape),
    Rule("broadcast", "error", ML_DRIFT_ELEMENTWISE, "inputs not numpy-broadcastable", check_broadcast,
         BINARY_ELEMENTWISE),
    Rule("broadcast-legacy", "warning", LEGACY, "broadcast pattern the legacy delegate lacks",
         check_legacy_broadcast, frozenset({"ADD", "MUL"})),
    Rule("all-constant-inputs", "error", ML_DRIFT_ELEMENTWISE, "elementwise op on constants only",
         check_all_constant, BINARY_ELEMENTWISE),
    Rule("constant-input", "error", ML_DRIFT_OPS, "data input must not be constant", check_constant_input,
         RUNTIME_INPUT_REQUIRED),
    Rule("batch-matmul-constant-rhs", "error", ML_DRIFT_BMM, "constant rhs must be 2-4D",
         check_bmm_constant_rhs, frozenset({"BATCH_MATMUL"})),
    Rule("batch-matmul-broadcast", "error", WEBGPU_2_3,
         "BATCH_MATMUL with broadcast batch dims: compiles, but computes wrong values", check_bmm_broadcast_batch,
         frozenset({"BATCH_MATMUL"})),
    Rule("rank2-constant-operand", "error", WEBGPU_2_3,
         "elementwise op of a rank-2 runtime tensor and a rank-2 constant: compiles, but computes wrong values",
         check_rank2_constant_operand, BINARY_ELEMENTWISE),
    Rule("resize-align-corners-half-pixel", "error", ML_DRIFT_RESIZE,
         "align_corners together with half_pixel_centers", check_resize_align_half, RESIZES),
    Rule("resize-align-corners", "error", PIXEL_8A, "RESIZE_BILINEAR align_corners=True",
         check_resize_align_corners, frozenset({"RESIZE_BILINEAR"})),
    Rule("transpose-conv", "error", PIXEL_8A, "TRANSPOSE_CONV", check_transpose_conv,
         frozenset({"TRANSPOSE_CONV", "CUSTOM"})),
    Rule("select-shapes", "error", LEGACY + "; ml_drift_delegate/tflite/support/support_select.cc",
         "branches must have the output shape or be scalar", check_select_shapes,
         frozenset({"SELECT", "SELECT_V2"})),
    Rule("gather-indices", "error", LEGACY + "; ml_drift_delegate/tflite/support/support_gather.cc",
         "GATHER indices must be 1-D INT32", check_gather_indices, frozenset({"GATHER"})),
    Rule("bool-tensor", "warning", ML_DRIFT + " (HasBoolTensor); legacy OpenGL backend",
         "BOOL tensors", check_bool_tensor),
    Rule("cast", "warning", LEGACY, "CAST", check_cast, frozenset({"CAST"})),
    Rule("slice-rank-legacy", "warning", LEGACY, "legacy SLICE/STRIDED_SLICE need a 3D or 4D input",
         check_legacy_slice_rank, frozenset({"SLICE", "STRIDED_SLICE"})),
    Rule("softmax-beta-legacy", "warning", LEGACY, "legacy SOFTMAX needs beta=1",
         check_legacy_softmax_beta, frozenset({"SOFTMAX"})),
    Rule("int8-fc-rank3-add", "error", "device report: some mobile GPUs; " + WEBGPU_2_3 + " (rel L2 0.57 vs CPU)",
         "dynamic-range INT8 FULLY_CONNECTED, rank-3 input, then ADD", check_fc_dynamic_range_rank3_add,
         frozenset({"FULLY_CONNECTED"})),
    Rule("int8-weight-only-fc", "error",
         "device report: WebGPU accelerator (DINOv2 FC 'Shape mismatch'); " + WEBGPU_2_3,
         "weight-only INT8 FULLY_CONNECTED fails graph modification", check_fc_weight_only_int8,
         frozenset({"FULLY_CONNECTED"})),
    Rule("fc-dequantize-input", "warning", "device report: Metal, OpenCL, WebGPU (FP16 weights run fully "
         "delegated and correct on the ai-edge-litert 2.3.0 WebGPU accelerator)",
         "FULLY_CONNECTED fed by an explicit DEQUANTIZE", check_fc_dequantize_input,
         frozenset({"FULLY_CONNECTED"})),
)
