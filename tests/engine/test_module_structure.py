"""The parts of a run execution do not import the scheduler that imports them: the state they
share is engine.execution, which imports none of them (no import circle, typing ones included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "engine"
PARTS = ("attempt", "cached_output", "monitor", "run_end", "upstream")


def imported(module: str) -> set[str]:
    tree = ast.parse((ENGINE / f"{module}.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):  # every import, under TYPE_CHECKING or in a function too
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("part", PARTS)
def test_parts_of_a_run_import_the_execution_not_the_scheduler(part: str) -> None:
    names = imported(part)
    assert "engine.scheduler" not in names
    assert "engine.execution" in names  # the state they work on (as a type)


def test_the_execution_imports_none_of_its_parts() -> None:
    names = imported("execution")
    assert not names & ({f"engine.{part}" for part in PARTS} | {"engine.scheduler"})
