"""One verdict per .tflite: static rules plus, optionally, the real GPU accelerator, which then decides."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from depthport.check.gpu_runtime import empty_runtime, run_gpu_check
from depthport.check.static import check_static
from depthport.core.report_model import GpuRuntime, Violation
from depthport.core.schema import ERROR, SKIPPED, Verdict, verdict_of
from depthport.core.tflite_graph import TfliteReadError, graph_summary, read_graph

NOT_REQUESTED = "runtime check not run (use --run-gpu)"


def static_verdict(violations: Sequence[Violation]) -> Verdict:
    """Pass when no rule of severity error is broken; warnings are listed with a pass."""
    errors = [v for v in violations if v.severity == "error"]
    figures = {"errors": len(errors), "warnings": len(violations) - len(errors)}
    if errors:
        first, rules = errors[0], ", ".join(sorted({v.rule for v in errors}))
        return Verdict.failed(f"{len(errors)} static error(s) ({rules}); first: op {first.op_index} "
                              f"{first.op}: {first.detail}", figures)
    return Verdict.passed(figures, note=f"{figures['warnings']} warning(s)" if figures["warnings"] else "")


def runtime_verdict(rt: GpuRuntime) -> Verdict:
    """The real accelerator's result: refused -> fail; compiled but off tolerance -> fail ("computes wrongly");
    no verdict (no Vulkan device, timeout, worker crash) -> not measured; not asked for -> not measured
    (skipped on request)."""
    figures = {"rel_l2_vs_cpu": rt.rel_l2_vs_cpu, "pearson_vs_cpu": rt.pearson_vs_cpu,
               "shape": list(rt.shape) if rt.shape is not None else None, "numeric_file": rt.numeric_file,
               "adapter": rt.adapter}
    figures = {k: v for k, v in figures.items() if v is not None}
    limits = {"rel_l2_vs_cpu": rt.tolerance} if rt.tolerance is not None else {}
    if rt.fully_delegated is None:
        cause = SKIPPED if rt.note == NOT_REQUESTED else ERROR
        return Verdict.not_measured(rt.note, cause, limits)
    if rt.fully_delegated is False:
        rejected = rejected_text(rt)
        return Verdict.failed(rt.note + (f"; rejected: {rejected}" if rejected else ""), figures, limits)
    if rt.numeric_ok is False:
        return Verdict.failed(f"computes wrongly on the GPU: {rt.note}", figures, limits)
    if rt.numeric_ok is None:
        return Verdict.passed(figures, limits, "fully delegated; numbers not compared")
    return Verdict.passed(figures, limits, f"fully delegated, rel L2 vs CPU {rt.rel_l2_vs_cpu:.2e}")


def rejected_text(runtime: GpuRuntime) -> str:
    """'OP (reason), ...' of the ops the accelerator refused ('' when none)."""
    return ", ".join(f"{r.op} ({r.reason})" for r in runtime.rejected_ops)


def gpu_decision(static: Verdict, runtime: Verdict) -> Verdict:
    """The GPU verdict of a file: the runtime's when it was asked for (it overrides the static one), else the
    static one."""
    if runtime.cause == SKIPPED:
        return static
    return runtime


def gpu_outcome(art: dict) -> tuple[Verdict, str | None]:
    """(the GPU verdict, why it did not pass or None) of a .tflite entry, read from its ``gpu_static`` and
    ``gpu_runtime`` checks (``gpu_decision``)."""
    static, on_gpu = verdict_of(art, "gpu_static"), verdict_of(art, "gpu_runtime")
    decided = gpu_decision(static, on_gpu)
    why = None if decided.ok else f"{'GPU runtime' if decided is on_gpu else 'static GPU check'}: {decided.reason}"
    return decided, why


@dataclass(frozen=True)
class TfliteCheck:
    """One .tflite's GPU check (``check_tflite``): its graph summary, the static rules' violations, the real
    accelerator's run (``runtime``), and the three verdicts; ``verdict`` is the runtime's when the runtime check
    ran, else the static one."""

    file: str
    op_count: int
    op_histogram: dict[str, int]
    max_tensor_rank: int
    violations: tuple[Violation, ...]
    runtime: GpuRuntime
    static: Verdict
    runtime_verdict: Verdict
    verdict: Verdict

    @property
    def gpu_clean(self) -> bool | None:
        """``verdict`` as True (pass), False (fail) or None (not measured)."""
        return self.verdict.to_dict()["passed"]

    @property
    def error_count(self) -> int:
        return sum(v.severity == "error" for v in self.violations)

    @property
    def warning_count(self) -> int:
        return sum(v.severity == "warning" for v in self.violations)


def check_tflite(path: str | Path, run_gpu: bool = False, numeric_file: str | Path | None = None,
                 compare: bool = True, enforce_f32: bool = True, timeout: float = 300.0, seed: int = 0,
                 rel_l2_tol: float | None = None) -> TfliteCheck:
    """Check `path` for full mobile-GPU delegation; raises TfliteReadError on bad input.

    `numeric_file` is an optional small-shape export of the same model used for the numerical GPU vs
    CPU run (the delegation verdict is always on `path`).
    """
    graph = read_graph(path)
    if numeric_file is not None:
        try:
            read_graph(numeric_file)
        except TfliteReadError as exc:
            raise TfliteReadError(f"numeric file {numeric_file}: {exc}") from exc
    violations = check_static(graph)
    if run_gpu:
        runtime = run_gpu_check(path, numeric_file=numeric_file, compare=compare, enforce_f32=enforce_f32,
                                timeout=timeout, seed=seed, rel_l2_tol=rel_l2_tol)
    else:
        runtime = empty_runtime(NOT_REQUESTED)
    static, on_gpu = static_verdict(violations), runtime_verdict(runtime)
    return TfliteCheck(file=str(path), **graph_summary(graph), violations=tuple(violations), runtime=runtime,
                       static=static, runtime_verdict=on_gpu, verdict=gpu_decision(static, on_gpu))
