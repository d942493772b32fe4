"""Check an exported file in Python before a native runtime reads it.

LiteRT reads a truncated .tflite without checking it and dies with a segmentation fault, which no Python
``except`` can catch. ``load_runner`` therefore calls ``validate_model_file`` first; every problem found here is
an ``InputError`` (one line, exit status 2):

- any file: it exists, is a file, is readable and is not empty;
- ``.tflite``: the ``TFL3`` flatbuffer identifier at bytes 4..8, and the whole flatbuffer parses with the schema
  that ships with ai_edge_litert (``depthport.check.tflite_graph.read_graph``: every table and vector in bounds,
  buffers stored past the flatbuffer inside the file, operator tensor indices valid), every string included (a
  string length running past the end made LiteRT crash when we fuzzed the tiny export; a well-formed file with
  bad contents, such as an unknown operator, is refused by LiteRT itself with an error);
- ``.onnx``: ``onnx.checker.check_model`` on the file (the protobuf parses and the graph is well formed);
- ``.pte``: ExecuTorch's flatbuffer identifier (``ET`` and two digits; ``ET12`` in the ``program.fbs`` that ships
  with the executorch package) at bytes 4..8, the flatbuffer's root offset inside the file and, when the file has
  one, its extended header (``eh00`` at bytes 8..12, laid out as ``executorch.exir._serialize._program.
  _ExtendedHeader``): the program and the segment data it announces must lie inside the file. ExecuTorch's
  runtime then verifies the flatbuffer itself (``Verification.InternalConsistency``, the default of
  ``Runtime.load_program``), which refuses anything else with an error.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from ..errors import InputError, require_utf8_path

_PTE_IDENTIFIER = re.compile(rb"ET\d\d")
_PTE_HEADER_MAGIC = b"eh00"
_PTE_HEADER_MIN_LENGTH = 4 + 4 + 8 + 8  # magic, header length, program size, segment base offset
_PTE_HEADER_LENGTH = _PTE_HEADER_MIN_LENGTH + 8  # + segment data size


def folder_given(path: Path) -> InputError:
    """The error for a folder given as the model: an export's folder names the model files in it."""
    try:
        files = sorted(p for p in path.iterdir() if p.suffix in _CHECKS and p.is_file())
    except OSError:
        files = []
    held = (f"; it holds {', '.join(p.name for p in files[:4])}{', ...' if len(files) > 4 else ''}: give one, e.g. "
            f"{files[0]}" if files else "")
    return InputError(f"model path {path} is a folder, not a model file{held}")


def validate_model_file(path: str | Path) -> Path:
    """``path`` if a runtime can be given it safely; else an InputError that says what is wrong with it."""
    path = Path(path)
    if path.is_dir():
        raise folder_given(path)
    if not path.is_file():
        raise InputError(f"model file not found: {path}")
    require_utf8_path(path.absolute(), "model file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if size == 0:
        raise InputError(f"model file {path} is empty (0 bytes)")
    check = _CHECKS.get(path.suffix)
    if check is not None:
        check(path, head, size)
    return path


class _BoundedBytes(bytes):
    """bytes whose slices may not run past the end. flatbuffers' Python reader bounds-checks every scalar and
    vector it reads (struct / numpy raise), but takes a string's length on trust and slices; LiteRT's C++ reader
    then reads that many bytes, past the end of the mapped file."""

    def __getitem__(self, key):
        if isinstance(key, slice) and key.stop is not None and key.stop > len(self):
            raise IndexError(f"a string at byte {key.start} runs to byte {key.stop}")
        return super().__getitem__(key)


def _check_tflite(path: Path, head: bytes, size: int) -> None:
    from ai_edge_litert import schema_py_generated as schema

    from ..core.tflite_graph import TfliteReadError, read_graph

    if len(head) < 8 or head[4:8] != b"TFL3":
        raise InputError(f"{path} is not a TFLite model (no TFL3 flatbuffer identifier at bytes 4..8)")
    try:
        read_graph(path)  # every table and vector in bounds, buffers inside the file, op tensor indices valid
        schema.ModelT.InitFromPackedBuf(_BoundedBytes(path.read_bytes()), 0)  # every string in bounds too
    except TfliteReadError as exc:
        if isinstance(exc.__cause__, (struct.error, IndexError, ValueError)):  # an offset or length out of bounds
            raise InputError(f"{path} is truncated or corrupt: its TFLite flatbuffer points past the end of the "
                             f"file ({size} bytes)") from None
        raise InputError(f"{path} is not a usable .tflite file: {exc}") from None
    except (struct.error, IndexError, ValueError) as exc:
        raise InputError(f"{path} is truncated or corrupt: {exc}, past the end of the file ({size} bytes)") from None


def _check_onnx(path: Path, head: bytes, size: int) -> None:
    import onnx

    try:
        onnx.checker.check_model(str(path))
    except Exception as exc:  # onnx raises its C++ ValidationError, and protobuf/OS errors, on bad files
        first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0].strip()
        if first.startswith("Unable to parse proto"):
            first = "its protobuf does not parse (truncated, or not an ONNX file)"
        raise InputError(f"{path} is not a valid ONNX model: {first}") from None


def _check_pte(path: Path, head: bytes, size: int) -> None:
    if len(head) < 8 or not _PTE_IDENTIFIER.fullmatch(head[4:8]):
        raise InputError(f"{path} is not an ExecuTorch program (no ET.. flatbuffer identifier at bytes 4..8)")
    root = int.from_bytes(head[0:4], "little")  # offset of the flatbuffer's root table
    if root + 4 > size:
        raise InputError(f"{path} is truncated: its flatbuffer root lies at byte {root}, the file has {size}")
    if head[8:12] != _PTE_HEADER_MAGIC:
        return  # no extended header: the program is the whole file, verified by the runtime
    if len(head) < 8 + _PTE_HEADER_MIN_LENGTH:
        raise InputError(f"{path} is truncated: {size} bytes end inside its ExecuTorch header")
    length = int.from_bytes(head[12:16], "little")
    program_size = int.from_bytes(head[16:24], "little")
    segment_base = int.from_bytes(head[24:32], "little")
    segment_size = int.from_bytes(head[32:40], "little") if length >= _PTE_HEADER_LENGTH else 0
    if length < _PTE_HEADER_MIN_LENGTH:
        raise InputError(f"{path} has a corrupt ExecuTorch header (length {length})")
    needed = max(program_size, segment_base + segment_size if segment_base else 0)
    if needed > size:
        raise InputError(f"{path} is truncated: its header announces {needed} bytes, the file has {size}")


_CHECKS = {".tflite": _check_tflite, ".onnx": _check_onnx, ".pte": _check_pte}
