"""The machine a latency was measured on: CPU model, cores, the threads a run used, and the SIMD features that
decide XNNPACK's kernels, read from the machine itself (Linux: /proc/cpuinfo "flags" on x86, "Features" on ARM).

``machine_info(threads)`` is the dict written beside every latency (``bench`` JSON, ``report.json``);
``describe(info)`` is its one-line form for the console.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from .report_model import Machine, load

# ISA feature -> the /proc/cpuinfo flags that show it (any of them). x86: "flags"; ARM: "Features".
X86_FEATURES = {
    "avx2": ("avx2",),
    "fma": ("fma",),
    "avx512f": ("avx512f",),
    "avx512_fp16": ("avx512_fp16",),
    "avx512_vnni": ("avx512_vnni",),
    "avx_vnni": ("avx_vnni",),
    "amx": ("amx_tile",),
    "amx_int8": ("amx_int8",),
    "amx_bf16": ("amx_bf16",),
    "amx_fp16": ("amx_fp16",),
}
ARM_FEATURES = {
    "neon": ("asimd", "neon"),
    "dotprod": ("asimddp",),
    "i8mm": ("i8mm",),
    "fp16_arith": ("asimdhp", "fphp"),
    "bf16": ("bf16",),
    "sve": ("sve",),
}
CPUINFO = Path("/proc/cpuinfo")


def parse_cpuinfo(text: str, arch: str | None = None) -> dict:
    """{"cpu", "physical_cores", "isa", "isa_source"} from the text of /proc/cpuinfo. ``arch`` (platform.machine())
    picks the feature table; without it, the presence of a "flags" line means x86."""
    fields: dict[str, str] = {}
    cores: set[tuple[str, str]] = set()
    physical = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "physical id":
            physical = value
        elif key == "core id":
            cores.add((physical or "0", value))
        fields.setdefault(key, value)
    x86 = ("flags" in fields) if arch is None else arch.lower() in ("x86_64", "amd64", "i386", "i686", "x86")
    flags = set((fields.get("flags") if x86 else fields.get("Features", "")).split()) if fields else set()
    table = X86_FEATURES if x86 else ARM_FEATURES
    cpu = fields.get("model name") or fields.get("Hardware") or fields.get("Processor") or _arm_part(fields)
    return {"cpu": cpu, "physical_cores": len(cores) or None,
            "isa": {name: any(f in flags for f in needs) for name, needs in table.items()} if flags else {},
            "isa_source": ("/proc/cpuinfo flags" if x86 else "/proc/cpuinfo Features") if flags else None}


def _arm_part(fields: dict[str, str]) -> str | None:
    """ARM Linux often has no model name: name the implementer and part numbers instead."""
    if "CPU implementer" not in fields:
        return None
    return f"ARM implementer {fields['CPU implementer']} part {fields.get('CPU part', '?')}"


def usable_cores() -> int:
    """Logical CPUs this process may run on (its affinity mask; os.cpu_count() where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 0


def machine_info(threads: int | None = None) -> dict:
    """{"cpu", "cores", "threads", "isa": {feature: bool}, ...} of this machine; ``threads`` is the thread count
    of the run the figures belong to (None when not one run's)."""
    try:
        parsed = parse_cpuinfo(CPUINFO.read_text(), platform.machine())
    except OSError:
        parsed = {"cpu": None, "physical_cores": None, "isa": {}, "isa_source": None}
    return {"cpu": parsed["cpu"] or platform.processor() or platform.machine(), "cores": usable_cores(),
            "logical_cpus": os.cpu_count() or 0, "physical_cores": parsed["physical_cores"], "threads": threads,
            "arch": platform.machine(), "isa": parsed["isa"],
            "isa_source": parsed["isa_source"] or "not readable here (no /proc/cpuinfo)", "os": platform.platform()}


def isa_text(isa: dict | None) -> str:
    """The features present, e.g. "avx2 fma"; "none of ..." when the machine has none of them."""
    if not isa:
        return "ISA flags unknown"
    present = [k for k, v in isa.items() if v]
    return " ".join(present) if present else f"none of {', '.join(isa)}"


def describe(info: dict | Machine) -> str:
    """One line: CPU model, cores, threads used, ISA features present."""
    info = info if isinstance(info, Machine) else load(Machine, info)
    threads = f", {info.threads} threads" if info.threads is not None else ""
    return f"{info.cpu}, {info.cores} cores{threads}; {isa_text(info.isa)}"


# The features with which XNNPACK's f16 kernels compute in FP16 arithmetic (not FP16 storage only).
FP16_ARITHMETIC = {"x86": ("avx512_fp16",), "arm": ("fp16_arith",)}


def fp16_arithmetic(info: dict | None = None) -> dict:
    """Whether an fp16 .pte verified on this machine is computed in FP16 arithmetic by XNNPACK.

    x86: XNNPACK runs its f16 GEMM, convolution and softmax kernels natively only with avx512_fp16 (Intel
    Sapphire Rapids and later; amx_fp16 CPUs have it too); on AVX2-only or AVX-512 CPUs without it an fp16
    file is converted and computed in FP32: FP16 storage only. ARM: the ARMv8.2-A FP16 extension ("asimdhp").
    Returns ``{"arithmetic": bool | None, "mode": "fp16 arithmetic" | "fp16 storage only" | "unknown",
    "reason"}``; ``arithmetic`` is None when the flags cannot be read. With FP16 arithmetic, ``subnormals`` says
    what XNNPACK does with FP16 subnormals: "kept" on x86, "flushed" (to zero) on ARM, as phones compute.
    """
    info = load(Machine, info or machine_info())
    isa, cpu = info.isa, info.cpu
    if not isa:
        return {"arithmetic": None, "mode": "unknown", "cpu": cpu, "reason": "the CPU's ISA flags cannot be read here"}
    x86 = "avx2" in isa or "avx512f" in isa
    needs = FP16_ARITHMETIC["x86" if x86 else "arm"]
    found = [f for f in needs if isa.get(f)]
    if found:
        return {"arithmetic": True, "mode": "fp16 arithmetic", "cpu": cpu, "subnormals": "kept" if x86 else "flushed",
                "reason": f"{cpu} has {', '.join(found)}: XNNPACK computes fp16 files in FP16"}
    return {"arithmetic": False, "mode": "fp16 storage only", "cpu": cpu,
            "reason": f"{cpu} has no {' / '.join(needs)}: XNNPACK stores FP16 but computes in FP32 "
                      "here, so a measured fp16 parity says nothing about FP16 arithmetic"}
