"""Which ops of a lowered ExecuTorch program run on a backend delegate, and which fall back to portable kernels."""

from __future__ import annotations

from collections import Counter

from torch import fx

from ..report.schema import Verdict

# Graph bookkeeping that the emitter resolves without running a kernel.
NOT_KERNELS = {"getitem"}
# A delegated file: at most one delegate subgraph (no CPU round trips between partitions) and at least this
# share of its ops inside it (what is left are the input/output dtype casts of an FP16 file).
MIN_COVERAGE, MAX_SUBGRAPHS = 0.99, 1


def delegation_report(graph_module: fx.GraphModule) -> dict:
    """``{"delegated", "portable", "subgraphs", "coverage", "portable_ops": {op: count}}`` of a lowered graph.

    ``delegated`` counts the edge ops inside delegate payloads, ``portable`` the kernels left outside them.
    """
    from executorch.devtools.backend_debug import get_delegation_info

    info = get_delegation_info(graph_module)
    portable = Counter()
    delegated = 0
    for op, row in info.delegation_by_operator.items():
        delegated += row.delegated
        if row.non_delegated and op not in NOT_KERNELS:
            portable[op] += row.non_delegated
    total = delegated + sum(portable.values())
    return {
        "delegated": delegated,
        "portable": sum(portable.values()),
        "subgraphs": info.num_delegated_subgraphs,
        "coverage": round(delegated / total, 6) if total else 0.0,
        "portable_ops": dict(sorted(portable.items())),
    }


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
