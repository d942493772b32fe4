"""A minimal ctypes binding of LiteRT's C API (the wheel's libLiteRt.so), for the one thing the Python package
does not expose: the op profiler of a compiled model.

Signatures follow LiteRT's public headers at the 2.3.0 release (litert/c/litert_environment.h, litert_model.h,
litert_options.h, litert_opaque_options.h, litert_compiled_model.h, litert_tensor_buffer.h, litert_profiler.h,
litert_profiler_event.h). Options are passed as LiteRT's TOML option payloads: "runtime_options_string"
(``enable_profiling = true``) and the CPU options, under both identifiers the runtime reads ("cpu_delegate" for
the interpreter, "xnnpack" for the XNNPACK accelerator). Tensor types are copied opaquely from the model's
signature into the buffer calls, so no struct layout beyond ``ProfiledEventData`` is assumed.
"""

from __future__ import annotations

import ctypes as C
from pathlib import Path

P = C.c_void_p
CPU = 1  # kLiteRtHwAcceleratorCpu
TENSOR_TYPE_BYTES = 256  # LiteRtRankedTensorType is 76 bytes at 2.3.0; room to spare, copied opaquely
_DELETER = C.CFUNCTYPE(None, P)


class _MemoryUsage(C.Structure):
    _fields_ = [("total_allocated_bytes", C.c_size_t), ("in_use_allocated_bytes", C.c_size_t),
                ("private_footprint_bytes", C.c_size_t)]


class ProfiledEventData(C.Structure):
    _fields_ = [("tag", C.c_char_p), ("event_type", C.c_int), ("start_timestamp_us", C.c_uint64),
                ("elapsed_time_us", C.c_uint64), ("begin_mem_usage", _MemoryUsage), ("end_mem_usage", _MemoryUsage),
                ("event_metadata1", C.c_uint64), ("event_metadata2", C.c_uint64), ("event_source", C.c_int)]


def library() -> C.CDLL:
    import ai_edge_litert

    path = Path(ai_edge_litert.__file__).parent / "libLiteRt.so"
    if not path.is_file():
        raise RuntimeError(f"LiteRT C library not found at {path}")
    return C.CDLL(str(path))


class _Session:
    """Environment, model, options and compiled model of one file, with the profiler enabled."""

    def __init__(self, lib: C.CDLL, path: str, threads: int):
        self.lib, self._keep = lib, [_DELETER(lambda _p: None)]
        self.env, self.model, self.compiled = P(), P(), P()
        self._check(lib.LiteRtCreateEnvironment(0, None, C.byref(self.env)), "LiteRtCreateEnvironment")
        self._check(lib.LiteRtCreateModelFromFile(self.env, str(path).encode(), C.byref(self.model)),
                    "LiteRtCreateModelFromFile")
        options = P()
        self._check(lib.LiteRtCreateOptions(C.byref(options)), "LiteRtCreateOptions")
        self._check(lib.LiteRtSetOptionsHardwareAccelerators(options, CPU), "LiteRtSetOptionsHardwareAccelerators")
        self._add(options, "runtime_options_string", "enable_profiling = true\n")
        for ident in ("cpu_delegate", "xnnpack"):
            self._add(options, ident, f"num_threads = {int(threads)}\n")
        self._check(lib.LiteRtCreateCompiledModel(self.env, self.model, options, C.byref(self.compiled)),
                    "LiteRtCreateCompiledModel")
        self.inputs = self._buffers("Input")
        self.outputs = self._buffers("Output")

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} returned LiteRtStatus {status}")

    def _add(self, options, identifier: str, toml: str) -> None:
        payload = C.create_string_buffer(toml.encode())
        self._keep.append(payload)
        opaque = P()
        self._check(self.lib.LiteRtCreateOpaqueOptions(identifier.encode(), C.cast(payload, P), self._keep[0],
                                                       C.byref(opaque)), f"LiteRtCreateOpaqueOptions({identifier})")
        self._check(self.lib.LiteRtAddOpaqueOptions(options, opaque), "LiteRtAddOpaqueOptions")

    def _buffers(self, kind: str):
        """Managed host buffers for every input (or output) of signature 0."""
        lib, signature = self.lib, P()
        self._check(lib.LiteRtGetModelSignature(self.model, 0, C.byref(signature)), "LiteRtGetModelSignature")
        buffers = []
        for i in range(64):
            tensor = P()
            if getattr(lib, f"LiteRtGetSignature{kind}TensorByIndex")(signature, i, C.byref(tensor)) != 0:
                break
            tensor_type = C.create_string_buffer(TENSOR_TYPE_BYTES)
            self._check(lib.LiteRtGetRankedTensorType(tensor, tensor_type), "LiteRtGetRankedTensorType")
            requirements, buffer = P(), P()
            self._check(getattr(lib, f"LiteRtGetCompiledModel{kind}BufferRequirements")(
                self.compiled, 0, i, C.byref(requirements)), f"LiteRtGetCompiledModel{kind}BufferRequirements")
            self._check(lib.LiteRtCreateManagedTensorBufferFromRequirements(
                self.env, tensor_type, requirements, C.byref(buffer)), "LiteRtCreateManagedTensorBuffer...")
            self._keep.append(tensor_type)
            buffers.append(buffer)
        if not buffers:
            raise RuntimeError(f"no {kind.lower()} tensors in signature 0")
        return (P * len(buffers))(*buffers)

    def run(self) -> None:
        self._check(self.lib.LiteRtRunCompiledModel(self.compiled, 0, len(self.inputs), self.inputs,
                                                    len(self.outputs), self.outputs), "LiteRtRunCompiledModel")


def _fill_inputs(session: _Session, seed: int = 0) -> None:
    """Random bytes of a fixed seed in every input buffer (standard normal for FP32 inputs)."""
    import numpy as np

    lib, rng = session.lib, np.random.default_rng(seed)
    for buffer in session.inputs:
        size, host = C.c_size_t(), P()
        _Session._check(lib.LiteRtGetTensorBufferSize(C.c_void_p(buffer), C.byref(size)), "LiteRtGetTensorBufferSize")
        _Session._check(lib.LiteRtLockTensorBuffer(C.c_void_p(buffer), C.byref(host), 1), "LiteRtLockTensorBuffer")
        values = rng.standard_normal(size.value // 4).astype(np.float32).tobytes()
        C.memmove(host, values, min(len(values), size.value))
        lib.LiteRtUnlockTensorBuffer(C.c_void_p(buffer))


def profiled_events(path: str, threads: int, runs: int, warmup: int) -> list[dict]:
    """Raw profiler events of ``runs`` profiled calls after ``warmup`` unprofiled ones:
    [{"tag", "type", "us", "node"}]."""
    lib = library()
    session = _Session(lib, path, threads)
    _fill_inputs(session)
    profiler = P()
    _Session._check(lib.LiteRtCompiledModelGetProfiler(session.compiled, C.byref(profiler)),
                    "LiteRtCompiledModelGetProfiler")
    if not profiler:
        raise RuntimeError("the compiled model has no profiler (runtime option enable_profiling not applied)")
    for _ in range(warmup):
        session.run()
    _Session._check(lib.LiteRtResetProfiler(profiler), "LiteRtResetProfiler")
    _Session._check(lib.LiteRtStartProfiler(profiler), "LiteRtStartProfiler")
    for _ in range(runs):
        session.run()
    _Session._check(lib.LiteRtStopProfiler(profiler), "LiteRtStopProfiler")
    count = C.c_int()
    _Session._check(lib.LiteRtGetNumProfilerEvents(profiler, C.byref(count)), "LiteRtGetNumProfilerEvents")
    events = (ProfiledEventData * count.value)()
    _Session._check(lib.LiteRtGetProfilerEvents(profiler, count.value, events), "LiteRtGetProfilerEvents")
    return [{"tag": (e.tag or b"").decode("utf-8", "replace"), "type": int(e.event_type),
             "us": int(e.elapsed_time_us) if e.elapsed_time_us < 2**62 else 0, "node": int(e.event_metadata1)}
            for e in events]
