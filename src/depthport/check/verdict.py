"""One verdict per .tflite: static rules plus, optionally, the real GPU accelerator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from depthport.check.gpu_runtime import empty_runtime, run_gpu_check
from depthport.check.static import check_static, has_errors
from depthport.check.tflite_graph import TfliteReadError, graph_summary, read_graph


def check_tflite(path: str | Path, run_gpu: bool = False, numeric_file: str | Path | None = None,
                 compare: bool = True, enforce_f32: bool = True, timeout: float = 300.0, seed: int = 0,
                 rel_l2_tol: float | None = None) -> dict[str, Any]:
    """Check `path` for full mobile-GPU delegation; raises TfliteReadError on bad input.

    `numeric_file` is an optional small-shape export of the same model used for the numerical GPU vs
    CPU run (the delegation verdict is always on `path`). `gpu_clean` is False exactly when a static
    error is found or the runtime check ran and failed (not fully delegated, or outputs off tolerance).
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
        runtime = empty_runtime("runtime check not run (use --run-gpu)")
    runtime_failed = runtime["fully_delegated"] is False or runtime["numeric_ok"] is False
    return {
        "file": str(path),
        "gpu_clean": not has_errors(violations) and not runtime_failed,
        **graph_summary(graph),
        "error_count": sum(v.severity == "error" for v in violations),
        "warning_count": sum(v.severity == "warning" for v in violations),
        "violations": [v.to_dict() for v in violations],
        "runtime": runtime,
    }
