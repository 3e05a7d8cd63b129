"""The three packages have no import circles and no upward imports, lazy (function-level) and
typing-only imports included: ``tui`` may import ``engine`` and ``store``, ``engine`` may import
``store``, and ``store`` imports neither.

An import circle means two modules cannot be understood, tested or changed one without the
other; the views reach the app through :mod:`tui.app_api` for that reason, and the engine's
modules import each other's deep paths, never the public :mod:`engine` (whose names load lazily
from them).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


PACKAGES = ("store", "engine", "tui")
LAYER = {package: rank for rank, package in enumerate(PACKAGES)}
"""A package may import only packages of a lower rank than its own (and itself)."""


def import_map(*packages: str) -> dict[str, set[str]]:
    """Every module of ``packages`` -> the modules of ``packages`` it imports (anywhere in it)."""
    modules = {
        module_name(p): p for package in packages for p in (ROOT / package).rglob("*.py")
    }
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_circles_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_tui_has_no_import_circles() -> None:
    assert circles(import_map("tui")) == []


def test_store_has_no_import_circles() -> None:
    assert circles(import_map("store")) == []


def test_engine_has_no_import_circles() -> None:
    assert circles(import_map("engine")) == []


def test_the_three_packages_together_have_no_import_circles() -> None:
    assert circles(import_map(*PACKAGES)) == []


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Edges that go from a lower layer to a higher one, as ``importer -> imported``."""
    return sorted(
        f"{importer} -> {imported}"
        for importer, targets in graph.items()
        for imported in targets
        if LAYER[imported.split(".")[0]] > LAYER[importer.split(".")[0]]
    )


def test_upward_imports_finds_one() -> None:
    assert upward_imports({"store.a": {"engine.b"}, "engine.b": {"store.a"}}) == [
        "store.a -> engine.b"
    ]


def test_no_package_imports_a_layer_above_it() -> None:
    assert upward_imports(import_map(*PACKAGES)) == []
