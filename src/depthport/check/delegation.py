"""The delegation verdict of a lowered ExecuTorch program: one backend subgraph holding (nearly) every op, or one per
precision where an fp16 file keeps a part in FP32 (``export.fp32_head``): subgraphs parted by dtype casts alone."""

from __future__ import annotations

from ..core.report_model import Delegation, load
from ..core.schema import Verdict

# A delegated file: at most one delegate subgraph (no CPU round trips between partitions) and at least this
# share of its ops inside it (what is left are the input/output dtype casts of an FP16 file).
MIN_COVERAGE, MAX_SUBGRAPHS = 0.99, 1
# The portable kernel of a dtype cast: XNNPACK converts no dtype inside a subgraph, so an fp16 file's FP32 part is a
# subgraph of its own behind one of these (each cast at most one more subgraph).
DTYPE_CASTS = frozenset({"dim_order_ops__to_dim_order_copy_default", "aten__to_copy_default"})


def delegation_verdict(found: Delegation | dict, backend: str) -> Verdict:
    """Pass when the backend takes the graph in one piece (``MIN_COVERAGE``, ``MAX_SUBGRAPHS``), or in pieces parted
    by dtype casts alone, which are then all that runs outside it; ``found``: the artifact's ``delegation``, typed
    or as report.json holds it."""
    d = load(Delegation, found) if isinstance(found, dict) else found
    figures = {"delegated": d.delegated, "portable": d.portable, "subgraphs": d.subgraphs, "coverage": d.coverage}
    limits = {"coverage": MIN_COVERAGE, "subgraphs": MAX_SUBGRAPHS}
    problems = []
    casts = set(d.portable_ops) <= DTYPE_CASTS
    if d.coverage < MIN_COVERAGE and not casts:  # a small graph's casts alone may be more than 1 % of its ops
        left = ", ".join(f"{op} x{n}" for op, n in list(d.portable_ops.items())[:5])
        problems.append(f"{backend} takes {100 * d.coverage:.1f} % of the ops (< {100 * MIN_COVERAGE:g} %); "
                        f"left on portable kernels: {left}")
    allowed = MAX_SUBGRAPHS + (d.portable if casts else 0)
    if d.subgraphs > allowed:
        problems.append(f"{d.subgraphs} {backend} subgraphs (CPU round trips between them)")
    if problems:
        return Verdict.failed(problems, figures, limits)
    parted = " parted by dtype casts only (a part kept in FP32)" if d.subgraphs > MAX_SUBGRAPHS else ""
    return Verdict.passed(figures, limits, f"{d.delegated}/{d.delegated + d.portable} ops "
                                           f"in {d.subgraphs} {backend} subgraph(s){parted}")
