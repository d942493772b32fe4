"""core: the helpers every layer shares (here, the one number formatter)."""

from __future__ import annotations

from depthport.core.formatting import fmt


def test_fmt_writes_figures_missing_values_and_flags_one_way():
    assert fmt(1.23456e-3, ".3e") == "1.235e-03"
    assert fmt(None) == "-" and fmt(None, missing="n/c") == "n/c" and fmt(None, ".3g", None) is None
    assert fmt(True) == "yes" and fmt(False) == "no"
    assert fmt(7, "d") == "7" and fmt("GPU") == "GPU"
