"""The public engine API: ``engine.__all__`` is exactly what ``engine`` exports, every name
loads from the module it names, importing ``engine`` costs nothing until a name is used, and
the examples and the documentation's snippets import the engine only from it."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import engine

ROOT = Path(__file__).resolve().parents[2]
INIT = ROOT / "engine" / "__init__.py"
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SNIPPET = re.compile(r"```python\n(.*?)```", re.S)
ENGINE_IMPORT = re.compile(r"^\s*from (engine[\w.]*) import (\([^)]*\)|[^\n]*)", re.M)


def typing_imports() -> dict[str, str]:
    """name -> module of the ``if TYPE_CHECKING:`` imports of ``engine/__init__.py``."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If))
    return {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def test_all_lists_every_public_name_once_and_the_type_checkers_see_the_same() -> None:
    assert engine.__all__ == sorted(engine._PUBLIC)
    assert typing_imports() == engine._PUBLIC


@pytest.mark.parametrize("name", engine.__all__)
def test_each_public_name_is_the_object_of_its_module(name: str) -> None:
    module = importlib.import_module(engine._PUBLIC[name])
    assert getattr(engine, name) is getattr(module, name)
    assert name in dir(engine)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        engine.Nope  # noqa: B018


def _loaded_after(code: str) -> list[str]:
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('engine', 'store', 'pydantic', 'httpx', 'numpy'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True, timeout=60)
    return json.loads(done.stdout)


def test_importing_engine_loads_nothing_until_a_name_is_used() -> None:
    assert _loaded_after("import engine") == ["engine"]
    ceiling = _loaded_after("from engine import Ceiling")
    assert "engine.ceiling" in ceiling and "pydantic" not in ceiling


def _engine_imports(text: str) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every ``from engine... import`` line of a snippet (which need not
    be a whole program, so it is not parsed)."""
    found = []
    for module, names in ENGINE_IMPORT.findall(text):
        names = re.sub(r"#[^\n]*", "", names).strip("()")
        found.append((module, [n.split(" as ")[0].strip() for n in names.split(",") if n.strip()]))
    return found


def test_the_examples_import_the_engine_only_from_its_public_api() -> None:
    for path in EXAMPLES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("engine"):
                assert node.module == "engine", f"{path.name}: from {node.module} import ..."
                assert {a.name for a in node.names} <= set(engine.__all__), path.name
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("engine") for a in node.names), path.name


def test_the_documentation_snippets_import_the_engine_only_from_its_public_api() -> None:
    found = 0
    for path in DOCUMENTS:
        for snippet in SNIPPET.findall(path.read_text(encoding="utf-8")):
            for module, names in _engine_imports(snippet):
                found += 1
                assert module == "engine", f"{path.name}: from {module} import ..."
                assert set(names) <= set(engine.__all__), f"{path.name}: {names}"
    assert found  # the snippets do show the engine API
