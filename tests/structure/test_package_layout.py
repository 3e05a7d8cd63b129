"""The dashboard and the engine stay made of small modules whose names say what they are: none
over 500 lines, no file name twice in a package, and no dashboard file name that also names a
module of ``store`` or ``engine``, nor an engine one that names a dashboard module (a reader who
meets ``memory.py`` should not have to ask which one)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500


def module_names(package: str) -> set[str]:
    """File names of ``package``'s modules (``__init__.py`` left out)."""
    return {p.name for p in (ROOT / package).rglob("*.py") if p.name != "__init__.py"}


@pytest.mark.parametrize("package", ["tui", "engine"])
def test_no_module_is_over_500_lines(package: str) -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in (ROOT / package).rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_tui_file_names_are_unique_and_not_those_of_store_or_engine() -> None:
    paths = [p for p in (ROOT / "tui").rglob("*.py") if p.name != "__init__.py"]
    names = [p.name for p in paths]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    assert sorted(set(names) & (module_names("store") | module_names("engine"))) == []


def test_engine_file_names_are_unique_and_not_those_of_tui() -> None:
    names = [p.name for p in (ROOT / "engine").rglob("*.py") if p.name != "__init__.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    assert sorted(set(names) & module_names("tui")) == []
