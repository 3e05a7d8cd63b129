"""SQL written once: every statement is SQLite text; PostgreSQL gets it rendered by this dialect.

The store's statements use SQLite's spelling (``:name`` and ``?`` markers). SQLite runs them as
they are. For PostgreSQL :func:`postgres_text` rewrites the mechanical differences, once per
text (cached):

* parameter markers: ``:name`` -> ``%(name)s``, ``?`` -> ``%s`` (and ``%`` -> ``%%``);
* "no limit": ``LIMIT -1`` -> ``LIMIT ALL``; a bound limit may be -1 too (``limit_param``),
  so ``LIMIT :limit`` -> ``LIMIT nullif(%(limit)s, -1)``;
* a note's, fact's or vector's number: ``rowid`` -> ``seq`` (``x AS rowid`` keeps its name);
* null-safe equality: ``IS :x`` -> ``IS NOT DISTINCT FROM``, ``IS NOT :x`` -> ``IS DISTINCT
  FROM``;
* SQLite's plan hints: ``INDEXED BY i`` and a unary ``+`` go, ``CROSS JOIN t ON`` is a
  ``JOIN``;
* ``instr(haystack, needle)`` -> ``strpos`` (the same arguments, the same 0 for "not there");
* two-argument ``max(a, b)`` / ``min(a, b)`` -> ``greatest`` / ``least``;
* a JSON array bound as one parameter: ``json_each(:x)`` -> ``jsonb_array_elements_text(...)``
  (both yield a ``value`` column);
* ``--`` comments are dropped (an apostrophe in one would read as a string).

:func:`postgres_statement` goes one step further, to what the server itself takes: ``$n``
placeholders (one per marker, as psycopg would send them) in encoded text and, for named
markers, the name each placeholder binds, so that executing a statement costs psycopg no
parsing of its text (psycopg caches its own parse only of statements under 4 KB; the one
statement that records a model call is longer, and was parsed again for every call).

Where the SQL really differs (a row lock, an upsert instead of ``INSERT OR REPLACE``, a
``tsvector`` column), a :class:`Statement` carries PostgreSQL's own text beside the SQLite one,
written with the same markers, and, where PostgreSQL needs parameters SQLite derives itself, a
function that derives them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

Derive = Callable[[Mapping[str, Any]], dict[str, Any]]


class Statement(str):
    """SQLite text (what SQLite runs) with PostgreSQL's own variant where the SQL differs."""

    postgres: str | None
    derive: Derive | None

    def __new__(cls, text: str, *, postgres: str | None = None, derive: Derive | None = None
                ) -> Statement:
        made = super().__new__(cls, text)
        made.postgres = postgres
        made.derive = derive
        return made


def postgres_params(sql: str, params: Any) -> Any:
    """The parameters to bind on PostgreSQL: the given ones plus any the statement derives."""
    derive = getattr(sql, "derive", None)
    if derive is None:
        return params
    if not isinstance(params, dict):
        raise TypeError("A statement with derived parameters takes named parameters.")
    return {**params, **derive(params)}


@functools.lru_cache(maxsize=2048)
def postgres_text(sql: str) -> str:
    """The PostgreSQL text of ``sql`` (its variant when it has one, else rendered)."""
    variant = getattr(sql, "postgres", None)
    return _render(variant if variant is not None else str(sql))


class Rendered:
    """A statement as PostgreSQL's extended protocol takes it (no client-side parsing left).

    A plain class, not a dataclass: the short commands import this module and must not pay
    for ``dataclasses`` (tests/cli/test_hot_commands.py)."""

    __slots__ = ("names", "text")

    def __init__(self, text: bytes, names: tuple[str, ...] | None) -> None:
        self.text = text
        """UTF-8 text with ``$1``, ``$2``... placeholders and literal ``%`` signs."""
        self.names = names
        """The named parameter each placeholder binds, in order (a name used twice binds
        two placeholders); None when the markers are positional (``?``)."""

    def arguments(self, params: Any) -> Any:
        """The values to bind, in placeholder order (named ones picked from the mapping)."""
        if isinstance(params, Mapping):
            if self.names is None:
                raise TypeError("A statement with positional markers takes a sequence.")
            return tuple([params[name] for name in self.names])
        return params


@functools.lru_cache(maxsize=2048)
def postgres_statement(sql: str) -> Rendered:
    """``sql`` rendered (:func:`postgres_text`) down to ``$n`` placeholders, once per text."""
    import re

    names: list[str | None] = []

    def placeholder(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        names.append(match.group(1))
        return f"${len(names)}"

    text = re.sub(r"%%|%\((\w+)\)s|%s", placeholder, postgres_text(sql))
    if None in names:
        return Rendered(text.encode(), None)
    return Rendered(text.encode(), tuple(name for name in names if name is not None))


def _render(sql: str) -> str:
    import re

    parts: list[str] = []
    for index, piece in enumerate(re.split(r"('(?:[^']|'')*'|--[^\n]*)", sql)):
        if index % 2:
            if not piece.startswith("--"):
                parts.append(piece.replace("%", "%%"))
            continue
        parts.append(_render_code(piece))
    return "".join(parts)


_MARKER = r"(?::[A-Za-z_]\w*|\?)"


def _render_code(code: str) -> str:
    import re

    code = code.replace("%", "%%")
    code = re.sub(r"\bLIMIT\s+-1\b", "LIMIT ALL", code)
    code = re.sub(r"\bLIMIT\s+:limit\b", "LIMIT nullif(:limit, -1)", code)
    code = re.sub(rf"\bIS\s+NOT\s+(?={_MARKER})", "IS DISTINCT FROM ", code)
    code = re.sub(rf"\bIS\s+(?={_MARKER})", "IS NOT DISTINCT FROM ", code)
    code = re.sub(r"\s+INDEXED\s+BY\s+\w+", "", code)
    code = re.sub(r"\bCROSS\s+JOIN\b(?=[^()]*?\bON\b)", "JOIN", code)
    code = re.sub(r"(\b(?:AND|OR|WHERE|ON)\s+|\(\s*)\+(?=[A-Za-z_])", r"\1", code)
    code = re.sub(r"\bjson_each\(([^()]*)\)", r"jsonb_array_elements_text(CAST(\1 AS jsonb))",
                  code)
    code = re.sub(r"(?<!\bAS )\b(\w+\.)?rowid\b", r"\1seq", code)
    code = re.sub(r"\binstr\(", "strpos(", code)
    code = _greatest_least(code)
    code = re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", r"%(\1)s", code)
    return code.replace("?", "%s")


def _greatest_least(code: str) -> str:
    """Two-argument (scalar) ``max``/``min`` -> ``greatest``/``least``; aggregates stay."""
    import re

    out: list[str] = []
    position = 0
    for match in re.finditer(r"\b(max|min)\(", code):
        start = match.end()
        depth, cursor, comma = 1, start, False
        while cursor < len(code) and depth:
            char = code[cursor]
            depth += char == "("
            depth -= char == ")"
            comma |= char == "," and depth == 1
            cursor += 1
        if comma:
            out.append(code[position : match.start()])
            out.append("greatest(" if match.group(1) == "max" else "least(")
            position = start
    out.append(code[position:])
    return "".join(out)
