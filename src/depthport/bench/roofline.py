"""Roofline figures beside each latency: GMAC counted from the file's graph, achieved GMAC/s, % of the GEMM peak
that the probe (``bench.probe``) measured in the same interleaved run.

    GMAC/s      = MACs counted from the graph / median latency
    % of peak   = GMAC/s / the FP32 GEMM chain's GMAC/s (median), both from the same rounds
    % of mixed peak (files with INT8 MACs) = the time every MAC would take at the peak of its own precision's chain
        (FP32, dynamic INT8, static INT8) / the median: the roofline of a file that mixes precisions
"""

from __future__ import annotations

from pathlib import Path

from ..core.report_model import Probe, load
from . import macs as macs_mod

METHOD = ("GMAC = multiply-accumulates of FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D, BATCH_MATMUL and "
          "TRANSPOSE_CONV (ONNX: MatMul, Gemm, Conv, ConvTranspose; torch: FlopCounterMode / 2) counted from the "
          "graph's static shapes; GMAC/s = GMAC / median latency; % of peak = GMAC/s / GMAC/s of the FP32 GEMM "
          "probe timed interleaved in the same rounds (median)")
# precision class (macs.precision_class) -> the probe chain that is its peak; other classes (e.g. float16 weights,
# which XNNPACK computes in FP32) use the FP32 chain
PEAK_KIND = {"fp32": "fp32", "int8_dynamic": "int8_dynamic", "int8": "int8_static"}
INT8_CLASSES = ("int8_dynamic", "int8")


def count_torch(model, input_shape) -> dict:
    """MACs of one eager forward pass of a PyTorch module, from torch's FlopCounterMode (FLOPs / 2 of its matrix
    products, convolutions and attention), per aten op. torch 2.13's counter has no formula for the CPU kernel of
    scaled_dot_product_attention (``_scaled_dot_product_flash_attention_for_cpu``, what transformers' attention
    runs here); it gets the counter's own SDPA formula."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

    def cpu_sdpa(query, key, value, *args, out_shape=None, **kwargs) -> int:
        return sdpa_flop_count(query, key, value)

    mapping = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: cpu_sdpa}
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        model(torch.zeros(tuple(input_shape)))
    by_op = {str(k): int(v) // 2 for k, v in counter.get_flop_counts().get("Global", {}).items()}
    total = sum(by_op.values())
    return {"counted": True, "method": "torch.utils.flop_counter.FlopCounterMode (FLOPs / 2)", "total": total,
            "gmac": total / 1e9, "by_op": by_op, "by_precision": {"fp32": total}, "uncounted": []}


def entry_macs(entry, cache: dict | None = None) -> dict:
    """MACs of a timing Entry's model: from the file's graph (runners with ``path``), from torch's counter
    (runners with ``model``), else not counted."""
    runner = entry.runner
    cache = {} if cache is None else cache
    path = getattr(runner, "path", None)
    if path is not None:
        key = str(Path(path).resolve())
        if key not in cache:
            cache[key] = macs_mod.count_macs(path)
        return cache[key]
    if getattr(runner, "model", None) is not None:
        try:
            return count_torch(runner.model, runner.input_shape)
        except Exception as exc:  # an eager model the counter cannot trace: say so, keep the latency
            return macs_mod.not_counted(f"torch FlopCounterMode failed: {exc.__class__.__name__}: {exc}")
    return macs_mod.not_counted("runner exposes no graph")


def figures(macs: dict, median_ms: float, probe: dict | None) -> dict:
    """{"gmac", "gmac_per_s", "pct_of_peak", ...} for one latency; None where not available (MACs not counted,
    no probe), with the reason under "macs"."""
    out = {"gmac": macs.get("gmac"), "gmac_per_s": None, "pct_of_peak": None,
           "macs": {k: macs.get(k) for k in ("counted", "method", "reason", "by_op", "by_precision", "uncounted")
                    if k in macs}}
    if out["macs"].get("uncounted"):
        out["macs"]["uncounted"] = out["macs"]["uncounted"][:10]
    if not macs.get("counted") or not macs.get("total") or not median_ms:
        return out
    rate = macs["total"] / 1e6 / median_ms
    out["gmac_per_s"] = rate
    probe = load(Probe, probe)
    if probe and probe.peak_gmac_per_s:
        out["pct_of_peak"] = 100 * rate / probe.peak_gmac_per_s
        by, kinds = macs.get("by_precision") or {}, probe.kinds
        needed = {PEAK_KIND.get(c, "fp32") for c in by}
        if any(c in INT8_CLASSES for c in by) and needed <= set(kinds):
            ideal_ms = sum(m / 1e6 / kinds[PEAK_KIND.get(c, "fp32")].gmac_per_s for c, m in by.items())
            out["pct_of_mixed_peak"] = 100 * ideal_ms / median_ms
    return out


def probe_lines(probe: dict | None) -> list[str]:
    """Console lines for the probe section."""
    probe = load(Probe, probe)
    if not probe or not probe.kinds:
        return []
    kinds = probe.kinds
    lines = [f"GEMM probe ({probe.chain}, {probe.gmac:.2f} GMAC, {probe.threads} threads, same rounds): "
             + "; ".join(f"{k} {v.median_ms:.1f} ms = {v.gmac_per_s:.1f} GMAC/s" for k, v in kinds.items())]
    lines.append(f"peak (FP32 chain, median) = {probe.peak_gmac_per_s:.1f} GMAC/s")
    for kind, gain in probe.int8_gain.items():
        lines.append(f"INT8 possible gain on this machine, {kinds[kind].what}: FP32 chain / INT8 chain = "
                     f"{gain.median:.2f}x (paired {gain.paired:.2f}x)")
    if probe.note:
        lines.append(probe.note)
    return lines
