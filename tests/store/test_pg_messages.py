"""Sentences a PostgreSQL workspace's user meets before any table exists (pure)."""

from __future__ import annotations

from store.db.postgres.pg_wording import missing_schema_message


def test_one_schema_named_gets_the_sql_that_creates_it_quoted() -> None:
    assert missing_schema_message("team_a").endswith('(CREATE SCHEMA "team_a";).')
    assert missing_schema_message('"Team A"').endswith('(CREATE SCHEMA "Team A";).')
    assert missing_schema_message('a"b').endswith('(CREATE SCHEMA "a""b";).')


def test_several_schemas_named_are_shown_literally() -> None:
    assert missing_schema_message("x, y") == (
        "The database URL's search path (x, y) names no schema that exists; create one first "
        "(CREATE SCHEMA name;).")
