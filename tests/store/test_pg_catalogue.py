"""The PostgreSQL twins follow the SQLite statements: none missing, none out of date."""

from __future__ import annotations

from store.search.tsvector import fts5_to_tsquery, tsvector_text
from store.sql.postgres.catalogue import catalogue, drift
from store.sql.postgres.followed import FOLLOWED

# Read only by the SQLite dashboard reader (PostgreSQL has no such pragmas).
SQLITE_ONLY = {"dashboard.DATA_VERSION", "dashboard.JOURNAL_MODE", "dashboard.USER_VERSION"}


def test_every_sqlite_statement_has_a_twin() -> None:
    built = catalogue()
    missing = {name for text, name in built.names.items() if text not in built.twins}
    assert missing == SQLITE_ONLY


def test_no_twin_is_out_of_date() -> None:
    changed = drift(FOLLOWED)
    assert not changed, (
        f"SQLite statements changed since their PostgreSQL twins were written: {changed}; "
        "update the twins in store/sql/postgres/, then run "
        "python -m store.sql.postgres.catalogue --record"
    )


def test_search_text_is_quoted_as_lexemes() -> None:
    assert tsvector_text("Ruff ruff, then pytest") == ("'ruff':1,2 'then':3 'pytest':4", 4)
    assert fts5_to_tsquery('"ruff" "pytest"') == "'ruff' & 'pytest'"
    assert fts5_to_tsquery('"ruff" OR "it\'s"') == "'ruff' | ('it' <-> 's')"
    assert fts5_to_tsquery('"a""b"') == "('a' <-> 'b')"
