"""The run query language, parsed: one pure parser for ``tether runs --where '…'`` and the
dashboard's ``/`` (compiled to SQL by :mod:`store.read.run_query_sql`).

A query is conditions joined by ``AND`` (or just a space), ``OR`` and ``NOT``, with
parentheses; keywords are case-insensitive. A condition is ``field op value``::

    status = failed AND workflow = code-review
    status IN (failed, cancelled) created > -7d
    cost > 0.50 OR tokens >= 200k
    model STARTS_WITH claude agent = claude-code
    input.repo = demo   error ~ "timed out"   text ~ pytest

Operators: ``=``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``~`` (contains), ``!~``,
``STARTS_WITH``, ``IN (a, b)``, ``NOT IN (…)``, ``BETWEEN a AND b``; ``field:value`` is
``field = value`` (``~`` on the fields matched by containment). A word that is not a condition
matches a run's id or workflow by substring, or its status, as the old filter did. Times are
UTC: ``2026-01-01``, ``2026-01-01T10:30``, or a time ago (``-7d``, ``12h``, ``today``); a date
compared with ``=`` is that whole day. Bad input raises :class:`InvalidInputError` with one
sentence; nothing is read before a query parses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from store.errors import InvalidInputError
from store.read.query_fields import (
    DAY_MS,
    FULLTEXT_FIELDS,
    OP_WORDS,
    OPS_BY_KIND,
    ORDERING,
    Field,
    Value,
    is_field,
    read_value,
    resolve_field,
)

# -- the tree -----------------------------------------------------------------------------

class Condition(NamedTuple):
    """``field op values`` with the values already read as the field's kind (times and
    durations in milliseconds, money in dollars, counts as integers)."""

    field: str
    op: str
    values: tuple[Value, ...]
    path: tuple[str, ...] = ()
    """For ``input.a.b``: ("a", "b")."""
    whole_day: bool = False
    """A date compared with ``=`` / ``!=``: ``values`` holds the day's start and end."""


class Word(NamedTuple):
    """A bare word: the run id or workflow contains it, or the status is it."""

    text: str


class Not(NamedTuple):
    """Negation."""

    inner: Node


class All(NamedTuple):
    """Conjunction."""

    parts: tuple[Node, ...]


class Either(NamedTuple):
    """Disjunction."""

    parts: tuple[Node, ...]


Node = Condition | Word | Not | All | Either


class Query(NamedTuple):
    """A parsed query: its tree (None for an empty query) and the text it came from."""

    text: str
    tree: Node | None

    @property
    def text_terms(self) -> tuple[str, ...]:
        """The words of every full-text condition (what the inspector highlights)."""
        return tuple(dict.fromkeys(
            str(c.values[0]) for c in conditions(self.tree) if c.field in FULLTEXT_FIELDS
        ))

    @property
    def scans_text(self) -> bool:
        """True when a condition reads prompts, outputs or logs (a bounded scan)."""
        return bool(self.text_terms)


def conditions(node: Node | None) -> list[Condition]:
    """Every condition of a tree, in reading order."""
    if node is None or isinstance(node, Word):
        return []
    if isinstance(node, Condition):
        return [node]
    if isinstance(node, Not):
        return conditions(node.inner)
    return [c for part in node.parts for c in conditions(part)]


# -- the parser ---------------------------------------------------------------------------

_SPACE = re.compile(r"\s*")
_BARE = re.compile(r"[^\s()\",'=<>!~]+")
_VALUE = re.compile(r"[^\s(),\"']+")
_OPERATOR = re.compile(r">=|<=|!=|!~|=|>|<|~|:")
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_KEYWORDS = ("and", "or", "not")
MAX_QUERY_CHARS = 2000


class _Parser:
    def __init__(self, text: str, now_ms: int) -> None:
        self.text = text
        self.now_ms = now_ms
        self.at = 0
        self.depth = 0
        """How many parentheses are open at the cursor."""

    # -- scanning ---------------------------------------------------------------------

    def skip(self) -> None:
        match = _SPACE.match(self.text, self.at)
        assert match is not None
        self.at = match.end()

    def done(self) -> bool:
        self.skip()
        return self.at >= len(self.text)

    def peek(self, char: str) -> bool:
        self.skip()
        return self.text.startswith(char, self.at)

    def keyword(self, *words: str) -> str | None:
        """The keyword at the cursor (consumed), or None."""
        self.skip()
        match = _BARE.match(self.text, self.at)
        if match is None or match.group().lower() not in words:
            return None
        self.at = match.end()
        return match.group().lower()

    def quoted(self) -> str | None:
        quote = self.text[self.at] if self.at < len(self.text) else ""
        if quote not in ("'", '"'):
            return None
        out: list[str] = []
        cursor = self.at + 1
        while cursor < len(self.text):
            char = self.text[cursor]
            if char == "\\" and cursor + 1 < len(self.text):
                out.append(self.text[cursor + 1])
                cursor += 2
                continue
            if char == quote:
                self.at = cursor + 1
                return "".join(out)
            out.append(char)
            cursor += 1
        raise InvalidInputError(
            f"The quote opened at character {self.at + 1} of the query is never closed."
        )

    def value(self, after: str) -> str:
        """One value (quoted, or bare up to a space, comma or parenthesis)."""
        self.skip()
        quoted = self.quoted()
        if quoted is not None:
            return quoted
        match = _VALUE.match(self.text, self.at)
        if match is None:
            raise InvalidInputError(f"The query needs a value after {after}.")
        self.at = match.end()
        return match.group()

    # -- grammar ----------------------------------------------------------------------

    def either(self) -> Node:
        parts = [self.all()]
        while self.keyword("or"):
            parts.append(self.all())
        return parts[0] if len(parts) == 1 else Either(tuple(parts))

    def all(self) -> Node:
        parts = [self.negation()]
        while not self.done() and not self.peek(")"):
            start = self.at
            if self.keyword("or"):
                self.at = start
                break
            self.keyword("and")
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else All(tuple(parts))

    def negation(self) -> Node:
        if self.keyword("not"):
            return Not(self.negation())
        return self.atom()

    def atom(self) -> Node:
        if self.done():
            raise InvalidInputError(
                "The query ends where a condition should be; add one or remove the last "
                "AND, OR or NOT."
            )
        if self.peek("("):
            opened = self.at
            self.at += 1
            self.depth += 1
            inner = self.either()
            self.depth -= 1
            if not self.peek(")"):
                raise InvalidInputError(
                    f"The parenthesis opened at character {opened + 1} of the query is never "
                    "closed."
                )
            self.at += 1
            return inner
        if self.peek(")"):
            if self.depth:  # "()" or "(a AND)": the parenthesis was opened, a condition is missing
                raise InvalidInputError(
                    f"The query has ')' at character {self.at + 1} where a condition should be."
                )
            raise InvalidInputError(
                f"The query closes a parenthesis at character {self.at + 1} that was never "
                "opened."
            )
        quoted = self.quoted()
        if quoted is not None:
            return Word(quoted)
        match = _BARE.match(self.text, self.at)
        if match is None:
            raise InvalidInputError(
                f"The query has {self.text[self.at]!r} at character {self.at + 1} where a "
                "field or a word should be."
            )
        word = match.group()
        if word.lower() in _KEYWORDS:
            raise InvalidInputError(
                f"{word.upper()} at character {self.at + 1} needs a condition before it."
            )
        head, colon, _ = word.partition(":")
        if colon and _FIELD_NAME.match(head) and is_field(head):
            # status:failed (a value may hold colons itself: started:2026-01-01T10:30).
            self.at = match.start() + len(head)
            return self.condition(head)
        self.at = match.end()
        return self.condition(word)

    def operator(self) -> str | None:
        """The operator after a field name (consumed), or None when there is none."""
        self.skip()
        symbol = _OPERATOR.match(self.text, self.at)
        if symbol is not None:
            self.at = symbol.end()
            return symbol.group()
        start = self.at
        word = self.keyword("starts_with", "in", "between", "not")
        if word == "not":
            if self.keyword("in"):
                return "not in"
            self.at = start
            return None
        return "starts" if word == "starts_with" else word

    def condition(self, word: str) -> Node:
        start = self.at
        op = self.operator()
        if op is None or not _FIELD_NAME.match(word):
            self.at = start if op is None else self.at
            if op is not None:
                resolve_field(word)  # says why it is not a field
            return Word(word)
        field, path = resolve_field(word)
        if op == ":":
            op = "~" if field.kind in ("contains", "fulltext") else "="
        elif op == "=" and field.kind in ("contains", "fulltext"):
            op = "~"
        allowed = OPS_BY_KIND[field.kind]
        if op not in allowed:
            words = [OP_WORDS[o] for o in allowed]
            spelled = ", ".join(words[:-1]) + f" or {words[-1]}" if len(words) > 1 else words[0]
            raise InvalidInputError(f"{field.name} takes {spelled}, not {OP_WORDS[op]}.")
        if op in ("in", "not in"):
            return self._listed(field, path, op)
        if op == "between":
            low = self._typed(field, self.value(f"{field.name} BETWEEN"))
            if not self.keyword("and"):
                raise InvalidInputError(f"{field.name} BETWEEN needs AND between its two values.")
            high = self._typed(field, self.value(f"{field.name} BETWEEN … AND"))
            return Condition(field.name, "between", (low[0], high[0]), path)
        value, whole_day = self._typed(field, self.value(f"{field.name} {OP_WORDS[op]}"))
        if field.kind == "json" and op in ORDERING and not isinstance(value, int | float):
            raise InvalidInputError(
                f"input.{'.'.join(path)} {OP_WORDS[op]} compares numbers; {value!r} is not one."
            )
        if field.kind in ("contains", "fulltext") and not str(value).strip():
            raise InvalidInputError(f"{field.name} ~ needs some text to look for.")
        if whole_day and op in ("=", "!="):
            day = int(value)
            return Condition(field.name, op, (day, day + DAY_MS), path, whole_day=True)
        return Condition(field.name, op, (value,), path)

    def _typed(self, field: Field, text: str) -> tuple[Value, bool]:
        return read_value(field, text, self.now_ms)

    def _listed(self, field: Field, path: tuple[str, ...], op: str) -> Condition:
        if not self.peek("("):
            raise InvalidInputError(
                f"{field.name} {OP_WORDS[op]} takes a list in parentheses, such as (a, b)."
            )
        self.at += 1
        values: list[Value] = []
        while True:
            values.append(self._typed(field, self.value(f"{field.name} {OP_WORDS[op]} ("))[0])
            if self.peek(","):
                self.at += 1
                continue
            if self.peek(")"):
                self.at += 1
                return Condition(field.name, op, tuple(values), path)
            raise InvalidInputError(
                f"The list after {field.name} {OP_WORDS[op]} needs a comma or a closing "
                "parenthesis."
            )


def parse_query(text: str, now_ms: int) -> Query:
    """Parse a run query (see the module docstring); ``now_ms`` anchors relative times.

    Raises:
        InvalidInputError: the query does not parse, in one sentence that says where.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInputError(f"A query may be at most {MAX_QUERY_CHARS} characters long.")
    parser = _Parser(text, now_ms)
    if parser.done():
        return Query(text, None)
    tree = parser.either()
    if not parser.done():
        if parser.peek(")"):
            raise InvalidInputError(
                f"The query closes a parenthesis at character {parser.at + 1} that was never "
                "opened."
            )
        raise InvalidInputError(
            f"The query has {text[parser.at:parser.at + 20]!r} at character {parser.at + 1} "
            "that is not a condition."
        )
    return Query(text, tree)


def all_of(queries: Sequence[Query]) -> Query:
    """Queries joined by AND (``--where``, a saved filter and ``--status``).

    Each is parsed on its own first, so an error names a place in the text the user wrote,
    and a query cannot close a parenthesis it did not open to reach into its neighbour.
    """
    trees = tuple(query.tree for query in queries if query.tree is not None)
    texts = [query.text.strip() for query in queries if query.tree is not None]
    if len(trees) < 2:
        return Query(texts[0] if texts else "", trees[0] if trees else None)
    return Query(" AND ".join(f"({text})" for text in texts), All(trees))


__all__ = [
    "All",
    "Condition",
    "Either",
    "Not",
    "Query",
    "Word",
    "all_of",
    "parse_query",
]
