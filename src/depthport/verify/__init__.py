"""Verification of exported files: parity with the upstream PyTorch model, ground-truth accuracy, gates."""

from .gates import DEFAULTS as GATE_DEFAULTS, apply_gates, evaluate as evaluate_gate, thresholds
from .metrics import delta125, max_abs, pearson, pooled_rel_l2, rel_l2, summarize

__all__ = ["GATE_DEFAULTS", "apply_gates", "delta125", "evaluate_gate", "max_abs", "pearson", "pooled_rel_l2",
           "rel_l2", "summarize", "thresholds"]
