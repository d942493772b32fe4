"""Where an INT8 file pays off: its speed against the FP32 file of the same runtime, timed in the same bench run,
beside the INT8 gain the GEMM probe measured on this machine, and the CPU features that decide that gain.

XNNPACK's INT8 GEMMs are fast where the CPU has INT8 dot-product instructions (x86: AVX512-VNNI, AVX-VNNI,
AMX-INT8; ARM: dotprod, i8mm); without them (x86 with AVX2 only) the probe's INT8 chains gain little over FP32.
Only this machine is measured: the card says so for the other class of CPU.
"""

from __future__ import annotations

from ..core.report_model import Bench, Report

# INT8 target -> (FP32 file of the same runtime it is timed against, the probe kind that bounds its gain).
# Weight-only INT8 dequantises to FP32 on the CPU: smaller, not faster, so no probe kind bounds it.
PEERS = {"litert-int8": ("litert-fp32", "int8_dynamic"), "litert-int8-weight": ("litert-fp32", None),
         "xnnpack-int8": ("xnnpack-fp32", "int8_dynamic")}
DOT_PRODUCT = {"avx512_vnni": "AVX512-VNNI", "avx_vnni": "AVX-VNNI", "amx_int8": "AMX-INT8", "dotprod": "dotprod",
               "i8mm": "i8mm"}
PAYS_OFF = 1.05  # at least 5 % faster than the FP32 file: below that the difference is within run-to-run noise


def dot_product_features(isa: dict[str, bool] | None) -> list[str]:
    """The INT8 dot-product features among ``isa`` (None: flags unknown)."""
    return [name for key, name in DOT_PRODUCT.items() if isa is not None and isa.get(key)]


def int8_view(report: Report) -> dict | None:
    """The card's INT8 section, or None when the export has no INT8 file."""
    arts = {a.target: a for a in report.artifacts}
    bench = report.bench or Bench()
    isa = bench.machine.isa if bench.machine is not None else None
    rows = []
    for target, (peer, kind) in PEERS.items():
        if target not in arts:
            continue
        mine, base = arts[target].median_ms, arts[peer].median_ms if peer in arts else None
        ratio = base / mine if mine and base else None
        gain = bench.probe.int8_gain[kind].median if kind in bench.probe.int8_gain else None
        realised = 100 * (ratio - 1) / (gain - 1) if ratio is not None and gain and gain > 1 else None
        rows.append({"file": arts[target].file, "peer": peer, "ratio": ratio, "gain": gain, "realised": realised,
                     "weight_only": kind is None,
                     "here": None if ratio is None else ("yes" if ratio >= PAYS_OFF else "no")})
    if not rows:
        return None
    return {"rows": rows, "isa_measured": isa is not None, "dot_product": dot_product_features(isa),
            "pays_off": PAYS_OFF}
