"""Pure checks behind the dialogs' live validation (tested directly, no Textual needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.json_text import JsonTextError, parse_json_text

__all__ = ["JsonProblem", "json_problem", "parse_json"]


@dataclass(frozen=True)
class JsonProblem:
    """Why a text is not JSON, and where (1-based line and column)."""

    line: int
    column: int
    message: str

    def describe(self) -> str:
        """One sentence naming the position, e.g. ``line 2, column 5: Expecting value``."""
        if not self.line:
            return self.message  # not about one place: too deep, a huge number, a surrogate
        return f"line {self.line}, column {self.column}: {self.message}"


def json_problem(text: str) -> JsonProblem | None:
    """Return why ``text`` is not JSON Tether accepts (store.json_text), or None."""
    try:
        parse_json_text(text)
    except JsonTextError as error:
        return JsonProblem(error.line or 0, error.column or 0, error.reason)
    return None


def parse_json(text: str) -> Any:
    """Parse JSON text already checked by :func:`json_problem` (the same rules)."""
    return parse_json_text(text)
