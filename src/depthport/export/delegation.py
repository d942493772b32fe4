"""Which ops of a lowered ExecuTorch program run on a backend delegate, and which fall back to portable kernels."""

from __future__ import annotations

from collections import Counter

from torch import fx

# Graph bookkeeping that the emitter resolves without running a kernel.
NOT_KERNELS = {"getitem"}


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
