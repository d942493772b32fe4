"""verify: parity with the upstream PyTorch model (and float64), ground-truth accuracy, gates and file status; web
folders in headless Chromium (``web_folder``), dynamic-shape files at several shapes (``shapes``). Layer 5, above
check: may import core, runtimes, web, reference, build, export and check (the browser verdicts); not bench,
report, pipeline or cli."""

from ..core.metrics import delta125, max_abs, pearson, pooled_rel_l2, rel_l2, summarize
from .gates import DEFAULTS as GATE_DEFAULTS
from .gates import apply_gates, thresholds
from .gates import evaluate as evaluate_gate

__all__ = ["GATE_DEFAULTS", "apply_gates", "delta125", "evaluate_gate", "make_references", "max_abs", "pearson",
           "pooled_rel_l2", "rel_l2", "summarize", "thresholds", "verify_file"]
# The verify stage's functions for use outside `depthport export` (benchmarks), imported when first asked for.
_STAGE_API = ("make_references", "verify_file")


def __getattr__(name: str):
    if name in _STAGE_API:
        from . import stage

        return getattr(stage, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
