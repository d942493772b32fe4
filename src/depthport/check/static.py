"""Static GPU-delegation check: every op of a .tflite against the rule table."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from depthport.check.rules import RULES, Rule
from depthport.core.report_model import Violation  # one rule broken by one op, as report.json's gpu_check holds it
from depthport.core.tflite_graph import Graph, read_graph


def check_static(path_or_graph: str | Path | Graph, rules: Iterable[Rule] = RULES) -> list[Violation]:
    """Return the violations of `rules` in the main subgraph, in op order."""
    graph = path_or_graph if isinstance(path_or_graph, Graph) else read_graph(path_or_graph)
    rules = tuple(rules)
    found = []
    for op in graph.ops:
        for rule in rules:
            detail = rule.check(op, graph) if rule.applies_to(op) else None
            if detail:
                found.append(Violation(op.index, op.name, rule.id, rule.severity, rule.source, detail,
                                       op.describe_shapes()))
    return found


def has_errors(violations: Iterable[Violation]) -> bool:
    """True when any violation has severity error."""
    return any(v.severity == "error" for v in violations)
