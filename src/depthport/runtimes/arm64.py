"""ExecuTorch on an emulated ARMv8.2-A CPU with FP16 arithmetic: an fp16 .pte computed as a phone's CPU does.

x86 CPUs without avx512_fp16 store FP16 but compute in FP32, so running an fp16 .pte there says nothing about
FP16 arithmetic. Here the file runs in ExecuTorch's own aarch64 build (PyPI's wheel) under qemu-user, on an
emulated CPU with the FP16 extension (``qemu-aarch64-static -cpu max,sme=off``): XNNPACK picks its
``neonfp16arith`` kernels (one FP16 fused multiply-add per product), and qemu computes each FP16 operation with
IEEE rounding. SME is switched off because XNNPACK prefers its SME kernels, which accumulate in FP32.

Every run first executes the sentinel file of ``runtimes.fp16_sentinel`` (4096 ones summed by an fp16 Linear:
2048 under FP16 accumulation, 4096 under FP32). The run counts as FP16 arithmetic only if the sentinel says so.

The emulated machine is built by ``benchmarks/arm64/setup.sh`` under ``$DEPTHPORT_ARM64_ROOT`` (default
``~/.cache/depthport/arm64-qemu``). Emulation costs about 12 ns per FP16 product on two Zen 5 cores: a
ViT-S-sized model at 518x686 takes minutes per image.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cache import cache_folder
from ..errors import InputError
from ..scratch import process_folder
from . import fp16_sentinel

ROOT_ENV = "DEPTHPORT_ARM64_ROOT"
QEMU_CPU = "max,sme=off"
GUEST = Path(__file__).with_name("arm64_guest.py")
DESCRIPTION = ("ARMv8.2-A FP16 arithmetic: ExecuTorch's aarch64 XNNPACK (neonfp16arith kernels) under "
               f"qemu-aarch64 -cpu {QEMU_CPU}")


def arm64_root() -> Path:
    return cache_folder("arm64-qemu", ROOT_ENV)


def availability() -> tuple[bool, str]:
    """Whether the emulated machine is ready here, and if not, why."""
    root = arm64_root()
    qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
    if qemu is None:
        return False, "qemu-aarch64 is not installed (benchmarks/arm64/setup.sh installs it)"
    missing = [p for p in ("sysroot/usr/bin/python3.11", "site/executorch", "site/torch", "stubs/libcudart.so.13")
               if not (root / p).exists()]
    if missing:
        return False, f"the aarch64 environment under {root} lacks {', '.join(missing)} (run benchmarks/arm64/setup.sh)"
    return True, DESCRIPTION


@dataclass
class Arm64Run:
    outputs: list[np.ndarray]
    sentinel_sum: float          # fp16_sentinel: 2048 under FP16 accumulation, 4096 under FP32
    arithmetic: bool             # FP16 arithmetic confirmed by the sentinel
    description: str
    seconds: float


def run_pte(path: str | Path, inputs: list[tuple[np.ndarray, ...]], threads: int = 2,
            timeout: float | None = None) -> Arm64Run:
    """Run ``path`` on each input tuple in one emulated aarch64 process (one ~60 s start for all of them)."""
    import time

    ok, reason = availability()
    if not ok:
        raise InputError(f"cannot run {Path(path).name} on the emulated ARMv8.2 CPU: {reason}")
    root = arm64_root()
    with tempfile.TemporaryDirectory(prefix="arm64-", dir=process_folder()) as tmp:
        tmp = Path(tmp)
        (tmp / "in").mkdir()
        (tmp / "out").mkdir()
        for i, arrays in enumerate(inputs):
            np.savez(tmp / "in" / f"{i:04d}.npz", **{f"arg{k}": np.ascontiguousarray(a) for k, a in enumerate(arrays)})
        sentinel = fp16_sentinel.write_sentinel(tmp / "sentinel.pte")
        env = {**os.environ, "QEMU_CPU": QEMU_CPU, "LD_LIBRARY_PATH": str(root / "stubs"),
               "PYTHONPATH": str(root / "site"), "PYTHONNOUSERSITE": "1"}
        qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
        cmd = [qemu, "-L", str(root / "sysroot"), str(root / "sysroot/usr/bin/python3.11"), "-P", str(GUEST),
               str(threads), str(sentinel), str(Path(path).resolve()), str(tmp / "in"), str(tmp / "out")]
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"the emulated aarch64 run of {Path(path).name} failed (exit {done.returncode}): "
                               + " | ".join(tail))
        total = float(np.load(tmp / "out" / "sentinel.npy").reshape(-1)[0])
        outputs = [np.load(tmp / "out" / f"{i:04d}.npy") for i in range(len(inputs))]
    arithmetic = fp16_sentinel.accumulates_in_fp16(total)
    description = f"{DESCRIPTION}; sentinel: {fp16_sentinel.describe(total)}"
    return Arm64Run(outputs, total, arithmetic, description, seconds)
