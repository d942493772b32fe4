"""The delegation verdict of a lowered ExecuTorch program: one backend subgraph holding (nearly) every op."""

from __future__ import annotations

from ..core.report_model import Delegation, load
from ..core.schema import Verdict

# A delegated file: at most one delegate subgraph (no CPU round trips between partitions) and at least this
# share of its ops inside it (what is left are the input/output dtype casts of an FP16 file).
MIN_COVERAGE, MAX_SUBGRAPHS = 0.99, 1


def delegation_verdict(found: Delegation | dict, backend: str) -> Verdict:
    """Pass when the backend takes the graph in one piece (``MIN_COVERAGE``, ``MAX_SUBGRAPHS``); ``found``: the
    artifact's ``delegation``, typed or as report.json holds it."""
    d = load(Delegation, found) if isinstance(found, dict) else found
    figures = {"delegated": d.delegated, "portable": d.portable, "subgraphs": d.subgraphs, "coverage": d.coverage}
    limits = {"coverage": MIN_COVERAGE, "subgraphs": MAX_SUBGRAPHS}
    problems = []
    if d.coverage < MIN_COVERAGE:
        left = ", ".join(f"{op} x{n}" for op, n in list(d.portable_ops.items())[:5])
        problems.append(f"{backend} takes {100 * d.coverage:.1f} % of the ops (< {100 * MIN_COVERAGE:g} %); "
                        f"left on portable kernels: {left}")
    if d.subgraphs > MAX_SUBGRAPHS:
        problems.append(f"{d.subgraphs} {backend} subgraphs (CPU round trips between them)")
    if problems:
        return Verdict.failed(problems, figures, limits)
    return Verdict.passed(figures, limits, f"{d.delegated}/{d.delegated + d.portable} ops "
                                           f"in {d.subgraphs} {backend} subgraph(s)")
