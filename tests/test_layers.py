"""The layer contract: depthport's packages import only downward, counting imports made inside functions.

The order, lowest first (the README's Layout and each package docstring say the same). A unit is a package or
a top-level module of ``src/depthport``; units in one layer do not import each other in a loop, and no unit
imports one of a higher layer.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "depthport"
LAYERS: list[tuple[str, ...]] = [
    ("__init__", "errors", "atomic", "scratch", "cache", "quiet", "focal", "file_kind", "tone_map", "preprocess", "outdir",
     "visualize", "core"),
    ("spec", "models", "runtimes", "web"),
    ("weights",),
    ("reference",),
    ("families",),
    ("registry",),
    ("fp16",),
    ("rewrites",),
    ("build",),
    ("export",),
    ("check",),
    ("verify",),
    ("bench",),
    ("report",),
    ("predict", "predict_inputs", "predict_many", "pipeline"),
    ("cli", "__main__"),
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _unit(parts: list[str]) -> str:
    """'depthport.verify.gates' -> 'verify'; 'depthport' -> '__init__'."""
    return parts[1] if len(parts) > 1 else "__init__"


def module_imports(package: Path = PACKAGE):
    """(importer module, imported module, 'file:line') for every import statement between depthport's own files,
    nested ones included; ``from pkg import name`` counts as an import of ``pkg.name`` where that is a module."""

    def is_module(name: str) -> bool:
        rel = Path(*name.split(".")[1:])
        return (package / rel).with_suffix(".py").exists() or (package / rel / "__init__.py").exists()

    for path in sorted(package.rglob("*.py")):
        parts = ["depthport", *path.relative_to(package).with_suffix("").parts]
        here = parts[:-1]  # the package a relative import starts from (an __init__'s own)
        src = ".".join(here if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{module}.{a.name}" if is_module(f"{module}.{a.name}") else module for a in node.names]
            for target in targets:
                if target.split(".")[0] == "depthport" and target != src:
                    yield src, target, f"{path.relative_to(package)}:{node.lineno}"


def import_edges(package: Path = PACKAGE) -> dict[tuple[str, str], list[str]]:
    """{(importer unit, imported unit): ['file:line', ...]}: ``module_imports`` between units (a top-level
    package or module of depthport)."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for src, target, where in module_imports(package):
        a, b = _unit(src.split(".")), _unit(target.split("."))
        if a != b and where not in edges[(a, b)]:
            edges[(a, b)].append(where)
    return edges


def strongly_connected(edges) -> list[set[str]]:
    """Components of more than one unit in the import graph (Tarjan)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_every_unit_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert units - set(RANK) == set(), "give each new package or module a place in LAYERS"


def test_imports_only_go_down():
    upward = {f"{a} -> {b}": where for (a, b), where in import_edges().items() if RANK[b] > RANK[a]}
    assert upward == {}


def test_no_import_loop_between_units():
    assert strongly_connected(import_edges()) == []


def module_edges(package: Path = PACKAGE) -> dict[tuple[str, str], list[str]]:
    """{(importer module, imported module): ['file:line', ...]} from ``module_imports``."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for src, target, where in module_imports(package):
        if where not in edges[(src, target)]:
            edges[(src, target)].append(where)
    return edges


def test_no_import_loop_between_modules():
    """Files import each other without loops too (a loop inside one package, through function-level imports
    included, is as much a knot as one between packages)."""
    assert strongly_connected(module_edges()) == []


def test_the_checker_sees_a_planted_upward_import(tmp_path):
    """The contract can fail: an import of cli planted inside a function of a lower unit is reported."""
    pkg = tmp_path / "depthport"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "cli" / "__init__.py").write_text("from ..core import schema\n")
    (pkg / "core").mkdir()
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "schema.py").write_text("def f():\n    from ..cli import main\n")
    edges = import_edges(pkg)
    assert edges[("core", "cli")] == ["core/schema.py:2"]
    assert strongly_connected(edges) == [{"core", "cli"}]


def test_the_checker_sees_a_planted_loop_between_modules(tmp_path):
    """A loop inside one package through a function-level import is reported."""
    pkg = tmp_path / "depthport" / "export"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "context.py").write_text("def small():\n    from .small import make\n")
    (pkg / "small.py").write_text("from .context import small\n")
    assert strongly_connected(module_edges(pkg.parent)) == [{"depthport.export.context", "depthport.export.small"}]


# Stage internals: what runs inside `depthport export`, not for use outside it.
STAGE_INTERNALS = ("depthport.pipeline.Stage", "depthport.export.context", "depthport.export.targets.ExportContext")


def benchmark_imports(folder: Path = PACKAGE.parents[1] / "benchmarks"):
    """('file:line', imported 'module.name') for every depthport import of the benchmark scripts."""
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("depthport"):
                for alias in node.names:
                    yield f"{path.name}:{node.lineno}", f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("depthport"):
                        yield f"{path.name}:{node.lineno}", alias.name


def test_benchmarks_use_the_api_not_stage_internals():
    """The benchmark scripts make files with ``export.files.TargetFiles`` and check them with ``check.files``,
    run exports through ``pipeline.run_export``, and never reach into a stage module, the export context or a
    private name."""
    found = list(benchmark_imports())
    assert len(found) > 50
    bad = [(where, name) for where, name in found
           if ".stage" in name or any(name == i or name.startswith(i + ".") for i in STAGE_INTERNALS)
           or name.rsplit(".", 1)[-1].startswith("_")]
    assert not bad, bad


def test_tests_mirror_the_packages():
    """Every test file sits in a folder named after the unit of depthport it tests (a package, or a top-level
    module such as predict or registry), or in e2e/ for whole commands; only this contract sits at the top."""
    tests = Path(__file__).resolve().parent
    units = {p.stem for p in PACKAGE.glob("*.py")} | {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    files = sorted(tests.rglob("test_*.py"))
    assert len(files) > 25
    misplaced = [str(p.relative_to(tests)) for p in files
                 if p.parent != tests and p.relative_to(tests).parts[0] not in units | {"e2e"}]
    top = [p.name for p in files if p.parent == tests]
    assert not misplaced and top == ["test_layers.py"], (misplaced, top)
