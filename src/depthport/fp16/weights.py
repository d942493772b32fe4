"""FP16 weight storage for a .tflite: float32 constants become float16 constants behind a DEQUANTIZE op.

This is the layout of TFLite's float16 quantization, which CPU kernels (XNNPACK) and GPU delegates read
directly: the DEQUANTIZE of a constant runs once at load time. ai-edge-quantizer's ``float_casting``
recipe does it for FULLY_CONNECTED and CONV weights only; ``cast_constants_fp16`` does it for every other
large float32 constant (BATCH_MATMUL weights, the baked position embedding), which is what brings the
FP16 file to about half the FP32 size.
"""

from __future__ import annotations

import numpy as np

# Constants smaller than this stay float32 (biases, norm constants): they weigh nothing and keep full precision.
MIN_ELEMENTS = 1024


def fp16_recipe() -> list[dict]:
    """ai-edge-quantizer recipe: FULLY_CONNECTED/CONV weights stored as float16, compute in float32."""
    from ai_edge_quantizer import qtyping, recipe_manager
    from ai_edge_quantizer.algorithm_manager import AlgorithmName

    manager = recipe_manager.RecipeManager()
    manager.add_weight_only_config(regex=".*", operation_name=qtyping.TFLOperationName.ALL_SUPPORTED, num_bits=16,
                                   algorithm_key=AlgorithmName.FLOAT_CASTING)
    return manager.get_quantization_recipe()


def _opcode_index(model, builtin: int, version: int) -> int:
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools.flatbuffer_utils import get_builtin_code_from_operator_code

    for i, code in enumerate(model.operatorCodes):
        if get_builtin_code_from_operator_code(code) == builtin:
            return i
    code = schema.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = builtin, min(builtin, 127), version
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1


def _uses(model, subgraph) -> tuple[dict[int, int], dict[int, set[int]]]:
    """Per tensor: the index of its first consumer op, and the builtin codes of all its consumers."""
    from ai_edge_litert.tools.flatbuffer_utils import get_builtin_code_from_operator_code

    first: dict[int, int] = {}
    codes: dict[int, set[int]] = {}
    for i, op in enumerate(subgraph.operators):
        code = get_builtin_code_from_operator_code(model.operatorCodes[op.opcodeIndex])
        for t in op.inputs:
            if t >= 0:
                first.setdefault(int(t), i)
                codes.setdefault(int(t), set()).add(code)
    return first, codes


def cast_constants_fp16(model_bytes: bytes, min_elements: int = MIN_ELEMENTS,
                        skip_consumers: frozenset[str] = frozenset()) -> tuple[bytes, int]:
    """The model with each float32 constant of at least ``min_elements`` values stored as float16.

    Each such tensor keeps its index, name and shape but becomes the output of a new DEQUANTIZE whose input
    is a float16 copy; the DEQUANTIZE goes right before the tensor's first consumer. Constants whose values
    do not fit float16 (|x| > 65504), or that feed an op named in ``skip_consumers`` (e.g.
    {"FULLY_CONNECTED"}), are left alone. Returns (new model bytes, number of tensors cast).
    """
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils as fbu

    model = fbu.read_model_from_bytearray(bytearray(model_bytes))
    for buffer in model.buffers:  # a list packs byte by byte (ai-edge-quantizer's output: 48 s for DA-V2-Small)
        if buffer.data is not None and not isinstance(buffer.data, np.ndarray):
            buffer.data = np.asarray(buffer.data, dtype=np.uint8)
    dequantize = None
    skip = {getattr(schema.BuiltinOperator, name) for name in skip_consumers}
    cast = 0
    for subgraph in model.subgraphs:
        first, consumers = _uses(model, subgraph)
        interface = set(subgraph.inputs) | set(subgraph.outputs)
        inserts: dict[int, list] = {}
        fp16_buffers: dict[int, int] = {}
        for index, tensor in enumerate(list(subgraph.tensors)):
            data = model.buffers[tensor.buffer].data if tensor.buffer else None
            if (tensor.type != schema.TensorType.FLOAT32 or data is None or len(data) < 4 * min_elements
                    or index in interface or index not in first or consumers[index] & skip):
                continue
            values = np.frombuffer(bytes(data), dtype="<f4")
            if not np.all(np.isfinite(values.astype(np.float16)) | ~np.isfinite(values)):
                continue
            if dequantize is None:
                dequantize = _opcode_index(model, schema.BuiltinOperator.DEQUANTIZE, version=3)
            if tensor.buffer not in fp16_buffers:
                buffer = schema.BufferT()
                buffer.data = np.frombuffer(values.astype("<f2").tobytes(), dtype=np.uint8)
                model.buffers.append(buffer)
                fp16_buffers[tensor.buffer] = len(model.buffers) - 1
            half = schema.TensorT()
            half.shape, half.type = list(tensor.shape), schema.TensorType.FLOAT16
            half.buffer, half.name = fp16_buffers[tensor.buffer], (tensor.name or b"") + b"_fp16"
            subgraph.tensors.append(half)
            tensor.buffer = 0
            op = schema.OperatorT()
            op.opcodeIndex, op.inputs, op.outputs = dequantize, [len(subgraph.tensors) - 1], [index]
            inserts.setdefault(first[index], []).append(op)
            cast += 1
        subgraph.operators = [new for i, op in enumerate(subgraph.operators)
                              for new in (*inserts.get(i, ()), op)]
    _drop_unreferenced(model)
    return bytes(fbu.convert_object_to_bytearray(model)), cast


def _drop_unreferenced(model) -> None:
    """Empty the buffers no tensor or metadata points to any more (indices stay valid)."""
    used = {t.buffer for sg in model.subgraphs for t in sg.tensors}
    used |= {m.buffer for m in model.metadata or []}
    for i, buffer in enumerate(model.buffers):
        if i not in used:
            buffer.data = None
