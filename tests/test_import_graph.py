"""The package's import graph: no circle anywhere, and layers that import one way.

Every `import` and `from ... import` statement counts, wherever it is: at the top, inside
a function, or under `if TYPE_CHECKING:`. `from package import name` is an edge to the
submodule `package.name` where that is a module, else to `package`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ("agents", "networks", "utils", "scripts", "integrations", "configs")

# Which top-level parts each part may import (besides itself).
ALLOWED = {
    "networks": set(),
    "agents": {"networks"},
    "utils": {"agents", "networks"},
    "integrations": {"utils", "agents", "networks"},
    "scripts": {"utils", "agents", "networks", "integrations", "configs"},
    "configs": set(),
}


def module_name(path: Path) -> str:
    parts = ("rltrain", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

# The diagnosis engine's concerns (utils/diagnosis/__init__.py): which of the others each
# may import. The rules judge without knowing how their statistics are measured, ranked
# or shown; the hook in watch.py wires the measurements to the rules.
ENGINE = "rltrain.utils.diagnosis"
ENGINE_ALLOWED = {
    "rules": set(),
    "measure": {"rules"},  # gradients, inputs, state_action call their rules' checks
    "ranking": {"rules"},
    "report": {"rules", "ranking", "measure"},  # heatmap_image draws measure's ClusterView
    "heatmaps": {"rules", "measure", "report"},  # report: heatmap_image, for each heatmap
    "watch": {"rules", "measure", "heatmaps"},
}


def modules() -> dict[str, Path]:
    found = {"rltrain": ROOT / "__init__.py"}
    for top in PACKAGE_DIRS:
        for path in (ROOT / top).rglob("*.py"):
            found[module_name(path)] = path
    return found


def import_edges(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source
                       for a in node.names]
        else:
            continue
        edges.update(t for t in targets if t in known and t != name)
    return edges


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: import_edges(name, path, known) for name, path in found.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_the_finder_sees_a_circle_through_a_function_level_import() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(edges) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_edges_count_imports_in_functions_and_under_type_checking(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from rltrain.x import A\n\ndef f():\n    import rltrain.y\n")
    assert import_edges("rltrain.m", source, {"rltrain.x", "rltrain.y"}) == {
        "rltrain.x", "rltrain.y"}


def test_no_import_circle_anywhere_in_the_package() -> None:
    assert circles(graph()) == []


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_layers_import_one_way(part: str) -> None:
    wrong = sorted(
        f"{name} -> {other}" for name, targets in graph().items()
        if name.startswith(f"rltrain.{part}") for other in targets
        if other.split(".")[1:2] and other.split(".")[1] != part
        and other.split(".")[1] not in ALLOWED[part])
    assert wrong == []


def engine_part(name: str) -> str | None:
    """`rules`, `measure`, ... for a module of the diagnosis engine, else None."""
    if not name.startswith(ENGINE + "."):
        return None
    return name.removeprefix(ENGINE + ".").split(".")[0]


@pytest.mark.parametrize("part", sorted(ENGINE_ALLOWED))
def test_the_diagnosis_engine_imports_one_way(part: str) -> None:
    wrong = sorted(
        f"{name} -> {other}" for name, targets in graph().items()
        if engine_part(name) == part for other in targets
        if engine_part(other) not in (None, part, *ENGINE_ALLOWED[part]))
    assert wrong == []
    assert {engine_part(name) for name in graph()} - {None} == set(ENGINE_ALLOWED)
