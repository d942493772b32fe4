"""Where the time goes in a .pte or an .onnx on the CPU, from each runtime's own profiler, summarized the way
``depthport.bench.profile`` summarizes LiteRT's (time per op type, the 10 slowest ops, MAC op types).

- ExecuTorch: ETDump (``Runtime.load_program(enable_etdump=True)``), read with ``executorch.devtools.Inspector``.
  The XNNPACK delegate reports one event per XNNPACK operator, named as LiteRT's XNNPACK names them, so a .pte
  and a .tflite profile compare line by line; ops left to portable kernels are reported as ``native_call_<op>``;
  ``Method::execute`` is the whole call.
- onnxruntime: ``SessionOptions.enable_profiling``: one event per graph node after onnxruntime's own fusions,
  named by op type (``Gemm``, ``FusedMatMul``, ...); ``model_run`` is the whole call.
Both run in a child process (ExecuTorch's threadpool is process-wide), on the same random input as LiteRT's.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..scratch import process_folder
from .profile import DEFAULT, DELEGATE_PROFILED_OPERATOR, OPERATOR, profile_tflite, summarize_events
from .timing import sample_input

METHODS = {
    ".pte": ("ExecuTorch's ETDump (Runtime.load_program(enable_etdump=True), executorch.devtools.Inspector) in a "
             "child process; one event per XNNPACK operator inside the delegate and per portable kernel outside it, "
             "mean over the profiled runs after warm-ups, event-tracer overhead included"),
    ".onnx": ("onnxruntime's profiler (SessionOptions.enable_profiling) in a child process; one event per graph node "
              "after onnxruntime's fusions (kernel time), mean over the profiled runs after warm-ups, profiler "
              "overhead included"),
}
NODES = {".pte": "node = the operator's number within its kind, as ETDump names it",
         ".onnx": "node = the node's name in onnxruntime's optimized graph"}
WHOLE_CALL = {".pte": "Method::execute", ".onnx": "model_run"}


def executorch_events(path: str, threads: int, runs: int, warmup: int) -> list[dict]:
    """ETDump events of ``runs`` calls after ``warmup`` calls, as {"tag", "type", "us", "node", "where"}."""
    import torch
    from executorch.devtools import Inspector
    from executorch.runtime import Runtime

    from ..runtimes.executorch import size_threadpool

    size_threadpool(threads)
    program = Runtime.get().load_program(Path(path), enable_etdump=True)
    method = program.load_method("forward")
    x = torch.from_numpy(sample_input(tuple(method.metadata.input_tensor_meta(0).sizes())))
    for _ in range(warmup + runs):
        method.execute([x])
    with tempfile.TemporaryDirectory(prefix="profile-", dir=process_folder()) as tmp:
        etdump = Path(tmp) / "run.etdp"
        program.write_etdump_result_to_file(str(etdump), str(Path(tmp) / "debug.bin"))
        frame = Inspector(etdump_path=str(etdump)).to_dataframe()
    events = []
    for name, raw in zip(frame["event_name"], frame["raw"]):
        times = list(raw)[-runs:]  # ms per call; the first ``warmup`` calls are left out
        if name == WHOLE_CALL[".pte"]:
            events += [{"tag": "Invoke", "type": DEFAULT, "us": ms * 1e3, "node": 0, "where": "ExecuTorch"}
                       for ms in times]
        elif "::" in name or name == "DELEGATE_CALL":
            continue  # program and method loading, and the delegate call around its own operators
        else:
            kind, _, number = name.partition(" #")
            portable = kind.startswith("native_call_")
            events += [{"tag": kind, "type": OPERATOR if portable else DELEGATE_PROFILED_OPERATOR, "us": ms * 1e3,
                        "node": int(number) if number.isdigit() else 0, "where": "portable" if portable else "XNNPACK"}
                       for ms in times]
    return events


def onnx_events(path: str, threads: int, runs: int, warmup: int) -> list[dict]:
    """onnxruntime profiler events of ``runs`` calls after ``warmup`` calls, as executorch_events gives them."""
    import onnxruntime as ort

    from ..runtimes.onnx import OnnxRunner

    with tempfile.TemporaryDirectory(prefix="profile-", dir=process_folder()) as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.log_severity_level = 3
        options.enable_profiling, options.profile_file_prefix = True, str(Path(tmp) / "ort")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        inp = session.get_inputs()[0]
        x = sample_input(OnnxRunner(path, threads).input_shape)  # a dynamic export: the shape it was made at
        for _ in range(warmup + runs):
            session.run(None, {inp.name: x})
        raw = json.loads(Path(session.end_profiling()).read_text())
    calls = [e for e in raw if e.get("cat") == "Session" and e.get("name") == WHOLE_CALL[".onnx"]]
    start = calls[warmup]["ts"] if len(calls) > warmup else 0
    events = [{"tag": "Invoke", "type": DEFAULT, "us": e["dur"], "node": 0, "where": "onnxruntime"}
              for e in calls[warmup:]]
    for e in raw:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= start:
            events.append({"tag": e["args"].get("op_name", "?"), "type": OPERATOR, "us": e["dur"],
                           "node": e["name"].removesuffix("_kernel_time"), "where": "onnxruntime",
                           "inputs": len(e["args"].get("input_type_shape", ()))})  # prepacked weights not listed
    return events


def profile_runtime(path: str | Path, threads: int = 2, runs: int = 5, warmup: int = 2, timeout: float = 1800) -> dict:
    """The profile of a .pte or .onnx (as ``profile.profile_tflite`` returns one), or {"error": ...}."""
    from .timing import child_json

    path = Path(path)
    suffix = path.suffix
    reader = {".pte": "executorch_events", ".onnx": "onnx_events"}.get(suffix)
    if reader is None or not path.is_file():
        return {"error": f"not a .pte or .onnx file: {path}"}
    code = ("import json; from depthport.bench.profile_runtimes import " + reader + "; "
            f"print(json.dumps({{'events': {reader}({str(path)!r}, {int(threads)}, {int(runs)}, {int(warmup)})}}))")
    raw = child_json(code, timeout, "profiler child")
    if "error" in raw:
        return raw
    out = summarize_events(raw["events"], runs)
    out.update(method=METHODS[suffix], nodes=NODES[suffix], threads=threads, warmup=warmup, file=path.name)
    return out


def profile_file(path: str | Path, threads: int = 2, runs: int = 5, warmup: int = 2) -> dict:
    """The runtime's own op profile of a .tflite (LiteRT), .pte (ExecuTorch) or .onnx (onnxruntime) file."""
    if Path(path).suffix == ".tflite":
        return profile_tflite(path, threads, runs, warmup)
    return profile_runtime(path, threads, runs, warmup)
