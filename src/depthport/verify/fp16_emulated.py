"""An fp16 .pte measured on FP16 arithmetic where the verifying CPU has none: on the emulated ARMv8.2-A CPU of
``runtimes.arm64`` (ExecuTorch's aarch64 XNNPACK, neonfp16arith kernels), asked for with ``fp16_arm64``.

The measurement goes into the artifact's ``fp16_arithmetic`` entry as ``emulated`` (a parity record like the
file's own, or ``{"not_measured": why}``), and ``gates.fp16_arithmetic_verdict`` judges it instead of the
prediction. Emulation is slow (about 12 ns per FP16 product on two cores), so it is off by default."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from ..core.report_model import NotMeasured
from ..core.schema import Fp16ArithmeticJson, ReportJson, not_measured_section
from ..errors import InputError, error_text
from ..runtimes.arm64 import run_pte
from .parity import References, parity_record

COMPUTE = "fp16 arithmetic (emulated ARMv8.2-A)"


def measure(path: Path, refs: References, threads: int, normalized: bool = True) -> dict:
    """The parity record of ``path`` run on the emulated CPU, or ``{"not_measured": why}``."""
    inputs = [(refs.input(img, normalized), *refs.extra(img)) for img in refs.parity_names]
    try:
        run = run_pte(path, inputs, threads=threads)
    except (InputError, RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return not_measured_section(f"emulated ARMv8.2-A run: {error_text(exc)}")
    if not run.arithmetic:
        return not_measured_section(run.description)
    size = refs.input_hw[0] * refs.input_hw[1]
    if any(out.size != size for out in run.outputs):
        return not_measured_section(f"emulated ARMv8.2-A run: {Path(path).name} returns {list(run.outputs[0].shape)}")
    outputs = {img: np.asarray(out, np.float32).reshape(refs.input_hw)
               for img, out in zip(refs.parity_names, run.outputs)}
    record = parity_record(outputs, refs, refs.label, "depthport eager model, same rewrites")
    record.update(runtime="executorch (aarch64, emulated)", compute=COMPUTE, compute_reason=run.description,
                  seconds=round(run.seconds, 1))
    return record


def apply(ctx, report: dict | ReportJson, refs: References, normalized: bool) -> None:
    """Measure every fp16 .pte whose FP16-arithmetic evidence would otherwise be a prediction."""
    if not ctx.options.fp16_arm64:
        return
    for art in ReportJson(report).artifacts:
        if art.fp16_arithmetic is None:
            continue
        found = Fp16ArithmeticJson(art.fp16_arithmetic)
        if found.arithmetic or art.parity_failed:
            continue
        ctx.detail(f"{Path(art.file).name} on the emulated ARMv8.2-A CPU", 0, 1)
        found.emulated = measure(ctx.out_dir / art.file, refs, ctx.options.threads, normalized)
        if not NotMeasured.matches(found.emulated):
            found.evidence = "measured (emulated ARMv8.2-A)"
