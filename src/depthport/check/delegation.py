"""The delegation verdict of a lowered ExecuTorch program: one backend subgraph holding (nearly) every op."""

from __future__ import annotations

from ..core.schema import Verdict

# A delegated file: at most one delegate subgraph (no CPU round trips between partitions) and at least this
# share of its ops inside it (what is left are the input/output dtype casts of an FP16 file).
MIN_COVERAGE, MAX_SUBGRAPHS = 0.99, 1


def delegation_verdict(report: dict, backend: str) -> Verdict:
    """Pass when the backend takes the graph in one piece (``MIN_COVERAGE``, ``MAX_SUBGRAPHS``)."""
    figures = {k: report[k] for k in ("delegated", "portable", "subgraphs", "coverage")}
    limits = {"coverage": MIN_COVERAGE, "subgraphs": MAX_SUBGRAPHS}
    problems = []
    if report["coverage"] < MIN_COVERAGE:
        left = ", ".join(f"{op} x{n}" for op, n in list(report["portable_ops"].items())[:5])
        problems.append(f"{backend} takes {100 * report['coverage']:.1f} % of the ops (< {100 * MIN_COVERAGE:g} %); "
                        f"left on portable kernels: {left}")
    if report["subgraphs"] > MAX_SUBGRAPHS:
        problems.append(f"{report['subgraphs']} {backend} subgraphs (CPU round trips between them)")
    if problems:
        return Verdict.failed(problems, figures, limits)
    return Verdict.passed(figures, limits, f"{report['delegated']}/{report['delegated'] + report['portable']} ops "
                                           f"in {report['subgraphs']} {backend} subgraph(s)")
