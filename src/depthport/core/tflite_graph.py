"""Read a .tflite flatbuffer into a plain op/tensor view.

The file is parsed with the schema that ships with ai_edge_litert
(`schema_py_generated`, flatbuffers object API); only the main subgraph (0) is
viewed, which is the one a GPU delegate partitions.
"""

from __future__ import annotations

import collections
import dataclasses
import struct
from functools import cached_property
from pathlib import Path
from typing import Any

from ai_edge_litert import schema_py_generated as schema

_OP_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
_DTYPE_NAMES = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
_OPTION_SCALARS = (bool, int, float, str)


class TfliteReadError(ValueError):
    """The file is not a readable TFLite model (missing, empty, not a tflite, truncated)."""


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One tensor of the main subgraph."""

    index: int
    name: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...] | None
    dtype: str
    is_constant: bool
    quant_scales: int

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_dynamic(self) -> bool:
        """True when the signature has an unknown (-1) dimension."""
        return any(d < 0 for d in (self.shape_signature or ()))

    @property
    def is_quantized(self) -> bool:
        return self.quant_scales > 0

    def describe(self) -> str:
        """Short form such as FLOAT32[1,3,8,8]c (c = constant)."""
        dims = ",".join(str(d) for d in (self.shape_signature if self.is_dynamic else self.shape))
        return f"{self.dtype}[{dims}]{'c' if self.is_constant else ''}"


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """One operator of the main subgraph, in execution order."""

    index: int
    name: str
    version: int
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo, ...]
    options: dict[str, Any]

    @property
    def present_inputs(self) -> tuple[TensorInfo, ...]:
        """Inputs without the optional (-1) slots."""
        return tuple(t for t in self.inputs if t is not None)

    def describe_shapes(self) -> str:
        ins = " ".join(t.describe() if t else "-" for t in self.inputs)
        outs = " ".join(t.describe() for t in self.outputs)
        return f"{ins} -> {outs}"


@dataclasses.dataclass(frozen=True)
class Graph:
    """The main subgraph of a .tflite file."""

    path: str
    ops: tuple[OpInfo, ...]
    tensors: tuple[TensorInfo, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    subgraph_count: int

    @cached_property
    def _producers(self) -> dict[int, OpInfo]:
        return {t.index: op for op in self.ops for t in op.outputs}

    @cached_property
    def _consumers(self) -> dict[int, list[OpInfo]]:
        table: dict[int, list[OpInfo]] = collections.defaultdict(list)
        for op in self.ops:
            for t in op.present_inputs:
                table[t.index].append(op)
        return table

    def producer(self, tensor: TensorInfo) -> OpInfo | None:
        """The op writing `tensor`, or None for graph inputs and constants."""
        return self._producers.get(tensor.index)

    def consumers(self, tensor: TensorInfo) -> list[OpInfo]:
        """The ops reading `tensor`."""
        return list(self._consumers.get(tensor.index, ()))


def read_graph(path: str | Path) -> Graph:
    """Parse `path` into a Graph; raises TfliteReadError on unreadable input."""
    data = _read_bytes(Path(path))
    model = _unpack(data)
    try:
        return _build_graph(str(path), model, len(data))
    except (IndexError, KeyError, TypeError, AttributeError) as exc:
        raise TfliteReadError(f"corrupt TFLite model ({exc.__class__.__name__}: {exc})") from exc


def graph_summary(path_or_graph: str | Path | Graph) -> dict[str, Any]:
    """Return {"op_count", "op_histogram", "max_tensor_rank"} of the main subgraph."""
    graph = path_or_graph if isinstance(path_or_graph, Graph) else read_graph(path_or_graph)
    histogram = collections.Counter(op.name for op in graph.ops)
    return {
        "op_count": len(graph.ops),
        "op_histogram": dict(histogram.most_common()),
        "max_tensor_rank": max((t.rank for t in graph.tensors), default=0),
    }


def _read_bytes(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise TfliteReadError("file not found") from exc
    except IsADirectoryError as exc:
        raise TfliteReadError("is a directory, not a .tflite file") from exc
    except OSError as exc:
        raise TfliteReadError(f"cannot read file ({exc.strerror})") from exc
    if not data:
        raise TfliteReadError("empty file")
    if len(data) < 8 or not schema.Model.ModelBufferHasIdentifier(data, 0):
        raise TfliteReadError("not a TFLite model (no TFL3 flatbuffer identifier)")
    return data


def _unpack(data: bytes) -> schema.ModelT:
    try:
        model = schema.ModelT.InitFromPackedBuf(data, 0)
    except (struct.error, IndexError, ValueError) as exc:  # what flatbuffers raises on an offset out of bounds
        raise TfliteReadError(f"truncated or corrupt TFLite model: its flatbuffer points past the end of the file "
                              f"({len(data)} bytes)") from exc
    except Exception as exc:
        raise TfliteReadError(f"corrupt TFLite model ({exc.__class__.__name__}: {exc})") from exc
    if not model.subgraphs:
        raise TfliteReadError("TFLite model has no subgraph")
    return model


def _build_graph(path: str, model: schema.ModelT, file_size: int) -> Graph:
    sub = model.subgraphs[0]
    tensors = tuple(_tensor(i, t, model.buffers, file_size) for i, t in enumerate(sub.tensors or ()))
    ops = tuple(_op(i, op, model, tensors) for i, op in enumerate(sub.operators or ()))
    return Graph(
        path=path,
        ops=ops,
        tensors=tensors,
        inputs=tuple(int(i) for i in _seq(sub.inputs)),
        outputs=tuple(int(i) for i in _seq(sub.outputs)),
        subgraph_count=len(model.subgraphs),
    )


def _tensor(index: int, t: schema.TensorT, buffers: list, file_size: int) -> TensorInfo:
    signature = t.shapeSignature
    quant = t.quantization
    scales = 0 if quant is None or quant.scale is None else len(quant.scale)
    return TensorInfo(
        index=index,
        name=_text(t.name),
        shape=tuple(int(d) for d in _seq(t.shape)),
        shape_signature=None if signature is None else tuple(int(d) for d in signature),
        dtype=_DTYPE_NAMES.get(t.type, f"TYPE_{t.type}"),
        is_constant=_has_data(buffers[t.buffer], file_size) if t.buffer else False,
        quant_scales=scales,
    )


def _has_data(buffer: schema.BufferT, file_size: int) -> bool:
    if buffer.offset > 1:
        if buffer.offset + buffer.size > file_size:
            raise TfliteReadError("truncated TFLite model (buffer data past end of file)")
        return buffer.size > 0
    return buffer.data is not None and len(buffer.data) > 0


def _op(index: int, op: schema.OperatorT, model: schema.ModelT, tensors: tuple[TensorInfo, ...]) -> OpInfo:
    code = model.operatorCodes[op.opcodeIndex]
    builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
    name = _OP_NAMES.get(builtin, f"BUILTIN_{builtin}")
    options = _options(op.builtinOptions) | _options(op.builtinOptions2)
    if name == "CUSTOM":
        options["custom_code"] = _text(code.customCode)
    return OpInfo(
        index=index,
        name=name,
        version=int(code.version),
        inputs=tuple(tensors[i] if i >= 0 else None for i in _seq(op.inputs)),
        outputs=tuple(tensors[i] for i in _seq(op.outputs) if i >= 0),
        options=options,
    )


def _options(options: object | None) -> dict[str, Any]:
    if options is None:
        return {}
    return {k: _text(v) if isinstance(v, bytes) else v for k, v in vars(options).items()
            if isinstance(v, (*_OPTION_SCALARS, bytes))}


def _seq(values) -> list[int]:
    return [] if values is None else [int(v) for v in values]


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
