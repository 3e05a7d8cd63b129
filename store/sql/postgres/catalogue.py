"""The statement catalogue: every SQLite statement text paired with its PostgreSQL twin.

The store modules name statements from the SQLite modules of ``store/sql/``. For a PostgreSQL
workspace, :class:`store.db.postgres.pg_database.PgConnection` looks each text up here. Pairs are
found by name:
``store.sql.<area>.NAME`` and ``store.sql.postgres.<area>.NAME``. Statements built by functions
from a few flags (note filters, search shapes) are paired by calling both modules' functions
with every combination of those flags.

A SQLite statement without a twin is not guessed at: running it on PostgreSQL raises
:class:`StatementMissing` naming it, so a statement added on one side shows up in the contract
tests at once. A SQLite statement that *changes* keeps its name, so pairing by name alone would
keep an out-of-date twin: ``followed.py`` records a fingerprint of the SQLite text each twin was
written for, and a test fails (naming the statements) when one no longer matches. After
updating the twins: ``python -m store.sql.postgres.catalogue --record``.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import sys
from collections.abc import Callable, Iterator
from functools import cache
from types import ModuleType
from typing import Any

from store.errors import TetherError
from store.sql.postgres.statement import Twin

AREAS = {
    "memory": "store.memory.memory_sql",
    "recall": "store.search.recall_sql",
    "runs": "store.runs.runs_sql",
    "events": "store.runs.events_sql",
    "calls": "store.runs.calls_sql",
    "guard": "store.runs.guard_sql",
    "task_cache": "store.runs.task_cache_sql",
    "memory_blocks": "store.memory.memory_blocks_sql",
    "dashboard": "store.read.dashboard_sql",
    "queue": "store.runs.queue_sql",
    "term_index": "store.search.term_sql",
    "vectors": "store.search.vectors_sql",
}

PgStatement = str | Twin


class StatementMissing(TetherError):
    """A SQLite statement has no PostgreSQL twin (a programming error, exit code 3)."""

    exit_code = 3


def _flag_combinations(names: tuple[str, ...]) -> Iterator[dict[str, bool]]:
    for values in itertools.product((False, True), repeat=len(names)):
        yield dict(zip(names, values, strict=True))


_FILTER_FLAGS = ("namespace", "namespace_kind", "statuses", "status", "include_superseded", "kind")


def _memory_builders(lite: ModuleType, pg: ModuleType) -> Iterator[tuple[str, str, Any]]:
    for flags in _flag_combinations(_FILTER_FLAGS):
        lite_where, pg_where = lite.note_filter(**flags), pg.note_filter(**flags)
        for newest_first in (False, True):
            yield (
                "list_notes_sql",
                lite.list_notes_sql(lite_where, newest_first=newest_first),
                pg.list_notes_sql(pg_where, newest_first=newest_first),
            )
        yield "count_notes_sql", lite.count_notes_sql(lite_where), pg.count_notes_sql(pg_where)


BUILDERS: dict[str, Callable[[ModuleType, ModuleType], Iterator[tuple[str, str, Any]]]] = {
    "memory": _memory_builders,
}


def _statements(module: ModuleType) -> Iterator[tuple[str, Any]]:
    for name, value in vars(module).items():
        if name.lstrip("_").isupper() and isinstance(value, str | tuple | Twin):
            yield name, value


class Catalogue:
    """SQLite text -> PostgreSQL statement, and SQLite text -> its name (for messages)."""

    def __init__(self) -> None:
        self.twins: dict[str, PgStatement] = {}
        self.names: dict[str, str] = {}

    def add(self, name: str, lite: Any, pg: Any) -> None:
        """Pair one statement (or, for tuples, each of its statements in order)."""
        if isinstance(lite, tuple):
            if not isinstance(pg, tuple) or len(pg) != len(lite):
                return
            for index, (one, other) in enumerate(zip(lite, pg, strict=True)):
                self.add(f"{name}[{index}]", one, other)
            return
        if not isinstance(lite, str) or not isinstance(pg, str | Twin):
            return
        known = self.twins.get(lite)
        if known is not None and known != pg:
            raise RuntimeError(f"Two PostgreSQL versions of one SQLite statement ({name}).")
        self.twins[lite] = pg
        self.names[lite] = name

    def name_only(self, name: str, lite: Any) -> None:
        """Remember a statement's name even though it has no twin (for the error message)."""
        for one in lite if isinstance(lite, tuple) else (lite,):
            if isinstance(one, str):
                self.names.setdefault(one, name)

    def lookup(self, text: str) -> PgStatement:
        """The PostgreSQL statement for ``text``.

        Raises:
            StatementMissing: a known SQLite statement without a twin, or unknown text that
                carries SQLite parameter markers.
        """
        twin = self.twins.get(text)
        if twin is not None:
            return twin
        name = self.names.get(text)
        what = name or " ".join(text.split())[:80]
        raise StatementMissing(
            f"The statement {what} has no PostgreSQL version in store/sql/postgres/."
        )


@cache
def catalogue() -> Catalogue:
    """The catalogue over every area (built once per process)."""
    built = Catalogue()
    for area, lite_module in AREAS.items():
        lite = importlib.import_module(lite_module)
        pg = importlib.import_module(f"store.sql.postgres.{area}")
        for name, value in _statements(lite):
            if hasattr(pg, name):
                built.add(f"{area}.{name}", value, getattr(pg, name))
            else:
                built.name_only(f"{area}.{name}", value)
        builder = BUILDERS.get(area)
        if builder is not None:
            for name, lite_text, pg_statement in builder(lite, pg):
                built.add(f"{area}.{name}", lite_text, pg_statement)
    return built


def fingerprints(built: Catalogue | None = None) -> dict[str, str]:
    """A short hash of the SQLite text(s) of every paired statement, by name."""
    built = built or catalogue()
    texts: dict[str, list[str]] = {}
    for text, name in built.names.items():
        if text in built.twins:
            texts.setdefault(name, []).append(text)
    return {
        name: hashlib.sha256("\x00".join(sorted(group)).encode()).hexdigest()[:16]
        for name, group in sorted(texts.items())
    }


def drift(recorded: dict[str, str]) -> list[str]:
    """Statements whose SQLite text changed (or appeared) since their twins were written."""
    now = fingerprints()
    return sorted(name for name, value in now.items() if recorded.get(name) != value)


def _record() -> None:
    from pathlib import Path

    lines = [
        '"""Fingerprints of the SQLite statements each PostgreSQL twin was written for',
        "(``python -m store.sql.postgres.catalogue --record`` after updating the twins).\"\"\"",
        "",
        "FOLLOWED: dict[str, str] = {",
        *(f'    "{name}": "{value}",' for name, value in fingerprints().items()),
        "}",
        "",
    ]
    Path(__file__).with_name("followed.py").write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__" and "--record" in sys.argv:
    _record()
