"""Pure checks behind the dialogs' live validation (tested directly, no Textual needed)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from store.ttl import format_ttl, parse_ttl

__all__ = ["JsonProblem", "format_ttl", "json_problem", "parse_json", "parse_ttl"]


@dataclass(frozen=True)
class JsonProblem:
    """Why a text is not JSON, and where (1-based line and column)."""

    line: int
    column: int
    message: str

    def describe(self) -> str:
        """One sentence naming the position, e.g. ``line 2, column 5: Expecting value``."""
        return f"line {self.line}, column {self.column}: {self.message}"


def json_problem(text: str) -> JsonProblem | None:
    """Return where ``text`` stops being JSON, or None when it parses."""
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return JsonProblem(error.lineno, error.colno, error.msg)
    except RecursionError:
        return JsonProblem(1, 1, "nested too deeply")
    return None


def parse_json(text: str) -> Any:
    """Parse JSON text already checked by :func:`json_problem`."""
    return json.loads(text)
