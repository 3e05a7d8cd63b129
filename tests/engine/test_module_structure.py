"""The parts of a run execution do not import the scheduling loop that imports them: the state
they share is engine.run.execution, which imports none of them (typing imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[2] / "engine" / "run"
PARTS = ("node_attempts", "attempt", "cached_output", "monitor", "run_end", "upstream")
LOOP = {"engine.run.scheduled_run", "engine.run.engine"}


def imported(module: str) -> set[str]:
    tree = ast.parse((RUN / f"{module}.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):  # every import, under TYPE_CHECKING or in a function too
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("part", PARTS)
def test_parts_of_a_run_import_the_execution_not_the_scheduling_loop(part: str) -> None:
    names = imported(part)
    assert not names & LOOP
    assert "engine.run.execution" in names  # the state they work on


def test_the_execution_imports_none_of_its_parts() -> None:
    names = imported("execution")
    assert not names & ({f"engine.run.{part}" for part in PARTS} | LOOP)
