"""Where the time goes in a .tflite on the CPU: LiteRT's own op profiler, per op type and the 10 slowest ops
(``profile_runtimes`` does the same for a .pte or an .onnx, with its own runtime's profiler).

The Python package (ai_edge_litert 2.3) exposes no profiler: ``CompiledModel`` takes no profiling option and
the Interpreter wrapper has no profiler hook. The C library in the same wheel (``ai_edge_litert/libLiteRt.so``)
does: the runtime option ``enable_profiling`` makes a compiled model attach LiteRT's profiler to its TFLite
interpreter, and ``LiteRtCompiledModelGetProfiler`` / ``LiteRtGetProfilerEvents`` return its events. This
module calls that C API through ctypes (signatures from LiteRT's public headers, litert/c/*.h at the 2.3.0
release) in a child process, so a mismatch cannot take the caller down.

What the events are: XNNPACK (the CPU path) reports one event per XNNPACK operator it runs, named by XNNPACK
(e.g. "Fully Connected (NC, F32) GEMM"), numbered within its own graph; ops XNNPACK does not take run as TFLite
kernels and are reported under their TFLite op name and node index. Event times have microsecond resolution;
the figures are means over the profiled runs (after untimed warm-ups), with the profiler's own overhead
included. XNNPACK operator types are also mapped back to the TFLite MAC op types (``XNN_TO_TFLITE``) so the
MACs counted from the graph give GMAC/s per MAC op type.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from .timing import child_json

METHOD = ("LiteRT's own profiler (C API of the wheel's libLiteRt.so via ctypes: runtime option enable_profiling, "
          "LiteRtCompiledModelGetProfiler, LiteRtGetProfilerEvents) in a child process; per-op events as XNNPACK "
          "(XNNPACK operator names) or TFLite (op names) report them, microsecond resolution, mean over the "
          "profiled runs after warm-ups, profiler overhead included")
# ProfiledEventData.event_type values (litert/c/litert_profiler_event.h)
DEFAULT, OPERATOR, DELEGATE_OPERATOR, DELEGATE_PROFILED_OPERATOR = 1, 2, 4, 8
OP_EVENTS = (OPERATOR, DELEGATE_OPERATOR, DELEGATE_PROFILED_OPERATOR)
NODES = ("node = the op's index in the runtime's own graph (XNNPACK operator index inside the delegated partition, "
         "TFLite node index otherwise)")
# XNNPACK operator name (substring) -> TFLite MAC op type, first match wins.
XNN_TO_TFLITE = (("Fully Connected", "FULLY_CONNECTED"), ("Batch Matrix Multiply", "BATCH_MATMUL"),
                 ("Deconvolution", "TRANSPOSE_CONV"), ("DWConv", "DEPTHWISE_CONV_2D"),
                 ("Convolution", "CONV_2D"))


# onnxruntime's fused node -> the graph's op type it replaces (MACs are counted on the graph as saved)
ONNX_RUN_AS = {"FusedMatMul": "MatMul"}


def mac_op_type(tag: str) -> str | None:
    """The MAC op type, as ``depthport.bench.macs`` counts it in the file, that a profiler event belongs to:
    XNNPACK operators map to TFLite op types (LiteRT and ExecuTorch alike), ExecuTorch portable kernels
    (``native_call_mm.out``) to ``aten::mm``, onnxruntime nodes to ONNX op types. None: not a MAC op."""
    for needle, op in XNN_TO_TFLITE:
        if needle in tag:
            return op
    from .macs import MAC_OPS_ONNX, MAC_OPS_TFLITE
    from .macs_pte import PORTABLE_MAC_KERNELS

    if tag.startswith("native_call_"):
        name = "aten::" + tag.removeprefix("native_call_").split(".")[0]
        return name if PORTABLE_MAC_KERNELS.match(name) else None
    tag = ONNX_RUN_AS.get(tag, tag)
    return tag if tag in MAC_OPS_TFLITE or tag in MAC_OPS_ONNX else None


def summarize_events(events: list[dict], runs: int, top: int = 10) -> dict:
    """Per op type and per op (mean ms per run) from raw events {"tag", "type", "us", "node"}."""
    delegate_internal = any(e["type"] in (DELEGATE_OPERATOR, DELEGATE_PROFILED_OPERATOR) for e in events)
    by_type: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_op: dict[tuple, float] = defaultdict(float)
    invoke = [e["us"] for e in events if e["type"] == DEFAULT and e["tag"] == "Invoke"]
    for e in events:
        if e["type"] not in OP_EVENTS:
            continue
        if delegate_internal and e["type"] == OPERATOR and "delegate" in e["tag"].lower():
            continue  # the delegate's kernel: its internal events are counted instead
        where = e.get("where") or ("TFLite" if e["type"] == OPERATOR else "XNNPACK")
        by_type[e["tag"]][0] += e["us"]
        by_type[e["tag"]][1] += 1
        by_op[(where, e["node"], e["tag"])] += e["us"]
    total_us = sum(v[0] for v in by_type.values())
    share = lambda us: 100 * us / total_us if total_us else 0.0  # noqa: E731
    types = [{"type": tag, "ms": us / runs / 1e3, "ops": round(n / runs), "pct": share(us), "mac_op": mac_op_type(tag)}
             for tag, (us, n) in by_type.items()]
    types.sort(key=lambda t: -t["ms"])
    ops = [{"where": w, "node": node, "type": tag, "ms": us / runs / 1e3, "pct": share(us)}
           for (w, node, tag), us in by_op.items()]
    ops.sort(key=lambda o: -o["ms"])
    return {"runs": runs, "ops_ms": total_us / runs / 1e3,
            "invoke_ms": sum(invoke) / len(invoke) / 1e3 if invoke else None,
            "by_type": types, "top": ops[:top], "op_events_per_run": sum(t["ops"] for t in types)}


def mac_rates(summary: dict, macs: dict, peak_gmac_per_s: float | None = None) -> list[dict]:
    """Per TFLite MAC op type: GMAC (from the graph), profiled ms, GMAC/s and % of the probe's peak, plus an
    "all MAC ops" row. XNNPACK may run an op as another type (e.g. a 1x1 CONV_2D as Fully Connected): the
    per-type rows are then approximate (their op counts differ, "tflite_ops" vs "runtime_ops"); the total row
    is not affected."""
    ms: dict[str, float] = defaultdict(float)
    ran: dict[str, int] = defaultdict(int)
    for t in summary["by_type"]:
        if t["mac_op"]:
            ms[t["mac_op"]] += t["ms"]
            ran[t["mac_op"]] += t["ops"]
    counts = macs.get("op_count") or {}
    rows = [_rate_row(op, count, ms.get(op), peak_gmac_per_s, counts.get(op), ran.get(op, 0))
            for op, count in (macs.get("by_op") or {}).items()]
    if rows:
        rows.append(_rate_row("all MAC ops", sum((macs.get("by_op") or {}).values()), sum(ms.values()) or None,
                              peak_gmac_per_s, sum(counts.values()), sum(ran.values())))
    return rows


def _rate_row(op: str, count: int, ms: float | None, peak: float | None, tflite_ops, runtime_ops) -> dict:
    rate = count / 1e6 / ms if ms else None
    return {"op": op, "gmac": count / 1e9, "ms": ms, "gmac_per_s": rate,
            "pct_of_peak": 100 * rate / peak if rate and peak else None, "tflite_ops": tflite_ops,
            "runtime_ops": runtime_ops}


def profile_tflite(path: str | Path, threads: int = 2, runs: int = 5, warmup: int = 2, timeout: float = 1800) -> dict:
    """Run the profiler on ``path`` in a child process; returns summarize_events(...) plus "method", or
    {"error": ...} when the profiler could not be used."""
    path = Path(path)
    if not path.is_file() or path.suffix != ".tflite":
        return {"error": f"--profile takes a .tflite file: {path}"}
    code = ("from depthport.bench.profile import _child; "
            f"_child({str(path)!r}, {int(threads)}, {int(runs)}, {int(warmup)})")
    raw = child_json(code, timeout, "profiler child")
    if "error" in raw:
        return raw
    out = summarize_events(raw["events"], runs)
    out.update(method=METHOD, nodes=NODES, threads=threads, warmup=warmup, file=path.name)
    return out


def _child(path: str, threads: int, runs: int, warmup: int) -> None:
    from .litert_c import profiled_events

    print(json.dumps({"events": profiled_events(path, threads, runs, warmup)}))


def print_profile(prof: dict) -> None:
    """Tables: time per op type, the MAC op types' GMAC/s, the 10 slowest ops."""
    import sys

    from rich.console import Console
    from rich.table import Table

    from ..core.machine import describe
    from ..core.formatting import fmt

    console = Console(width=None if sys.stdout.isatty() else 160)
    if "error" in prof:
        console.print(f"profile: {prof['error']}")
        return
    head = (f"{prof['file']}, {prof['threads']} threads, mean of {prof['runs']} profiled calls: ops "
            f"{prof['ops_ms']:.2f} ms" + (f", invoke {prof['invoke_ms']:.2f} ms" if prof.get("invoke_ms") else ""))
    types = Table(title=f"time per op type: {head}", caption=describe(prof["machine"]) if "machine" in prof else None)
    for col in ("op type (as the runtime names it)", "ops", "ms", "%", "MAC op"):
        types.add_column(col)
    for t in prof["by_type"]:
        types.add_row(t["type"], str(t["ops"]), f"{t['ms']:.3f}", f"{t['pct']:.1f}", t["mac_op"] or "")
    console.print(types)
    if prof.get("mac_ops"):
        rates = Table(title="MAC op types: GMAC counted from the graph / profiled time")
        for col in ("op type in the file", "ops in file", "ops run", "GMAC", "ms", "GMAC/s", "% of peak"):
            rates.add_column(col)
        for r in prof["mac_ops"]:
            rates.add_row(r["op"], str(r["tflite_ops"]), str(r["runtime_ops"]), f"{r['gmac']:.3f}", fmt(r["ms"], ".2f"),
                          fmt(r["gmac_per_s"], ".1f"), fmt(r["pct_of_peak"], ".1f"))
        console.print(rates)
        if any(r["tflite_ops"] != r["runtime_ops"] for r in prof["mac_ops"]):
            console.print("ops in file != ops run: the runtime ran some ops as another type (e.g. XNNPACK runs a 1x1 "
                          "CONV_2D as Fully Connected; onnxruntime fuses MatMul + Add into Gemm), so the per-type rates "
                          "are approximate; the 'all MAC ops' row is exact")
    top = Table(title=f"top {len(prof['top'])} ops")
    for col in ("runtime", "node", "op type", "ms", "%"):
        top.add_column(col)
    for o in prof["top"]:
        top.add_row(o["where"], str(o["node"]), o["type"], f"{o['ms']:.3f}", f"{o['pct']:.1f}")
    console.print(top)
    console.print(f"method: {prof['method']}; {prof.get('nodes', NODES)}")
