"""The three packages stay made of small modules whose names say what they are: none over 500
lines, and no file name twice anywhere in ``store``, ``engine`` and ``tui`` (a reader who meets
``memory.py`` should not have to ask which one)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500


@pytest.mark.parametrize("package", ["store", "engine", "tui"])
def test_no_module_is_over_500_lines(package: str) -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in (ROOT / package).rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_file_names_are_unique_across_the_three_packages() -> None:
    names = [
        p.name
        for package in ("store", "engine", "tui")
        for p in (ROOT / package).rglob("*.py")
        if p.name != "__init__.py"
    ]
    assert sorted({n for n in names if names.count(n) > 1}) == []
