"""SQL written once: the dialect renders SQLite's spelling for PostgreSQL, rule by rule.

Whether each rendered statement does on PostgreSQL what it does on SQLite is the business of
the conformance tests (every store test runs on both backends); these pin the rules.
"""

from __future__ import annotations

import pytest

from store.db.dialect import Statement, postgres_params, postgres_statement, postgres_text
from store.search.tsvector import fts5_to_tsquery, tsvector_text


def test_markers_become_psycopg_placeholders_and_percent_signs_are_doubled() -> None:
    assert postgres_text("SELECT * FROM t WHERE a = :a AND b = ? AND c LIKE 'x%'") == (
        "SELECT * FROM t WHERE a = %(a)s AND b = %s AND c LIKE 'x%%'"
    )


def test_a_statement_reaches_the_server_with_numbered_placeholders_once_rendered() -> None:
    rendered = postgres_statement("SELECT :a, :b, :a FROM t WHERE c LIKE 'x%' AND d = '?'")
    assert rendered.text == b"SELECT $1, $2, $3 FROM t WHERE c LIKE 'x%' AND d = '?'"
    assert rendered.names == ("a", "b", "a")  # each use binds its own placeholder
    assert rendered.arguments({"a": 1, "b": "two", "unused": 3}) == (1, "two", 1)
    assert postgres_statement("SELECT :a, :b, :a FROM t WHERE c LIKE 'x%' AND d = '?'") is (
        rendered
    )  # rendered once per text


def test_positional_markers_bind_the_given_sequence() -> None:
    rendered = postgres_statement("UPDATE t SET a = ? WHERE b IS ? AND c = '%s'")
    assert rendered.text == b"UPDATE t SET a = $1 WHERE b IS NOT DISTINCT FROM $2 AND c = '%s'"
    assert rendered.names is None
    assert rendered.arguments((1, 2)) == (1, 2)
    with pytest.raises(TypeError):
        rendered.arguments({"a": 1})


def test_a_statement_without_markers_is_sent_as_written() -> None:
    rendered = postgres_statement("SELECT 100 % 7; SELECT 'a%b'")
    assert rendered.text == b"SELECT 100 % 7; SELECT 'a%b'"
    assert rendered.names == ()


def test_text_inside_quotes_and_comments_is_not_rewritten() -> None:
    sql = "SELECT ':not_a_marker', 'rowid?' -- the writer's note: rowid ?\nFROM t"
    assert postgres_text(sql) == "SELECT ':not_a_marker', 'rowid?' \nFROM t"


def test_no_limit_is_spelled_for_postgresql() -> None:
    assert postgres_text("SELECT 1 LIMIT -1") == "SELECT 1 LIMIT ALL"
    assert postgres_text("SELECT 1 LIMIT :limit") == "SELECT 1 LIMIT nullif(%(limit)s, -1)"
    assert postgres_text("SELECT 1 LIMIT :pool") == "SELECT 1 LIMIT %(pool)s"


def test_rowid_is_seq_and_keeps_its_name_where_it_is_read() -> None:
    assert postgres_text("SELECT n.rowid AS rowid FROM notes n WHERE n.rowid > :after") == (
        "SELECT n.seq AS rowid FROM notes n WHERE n.seq > %(after)s"
    )
    assert postgres_text("SELECT note_rowid, source_rowid FROM x") == (
        "SELECT note_rowid, source_rowid FROM x"
    )


def test_null_safe_equality() -> None:
    assert postgres_text("WHERE a IS :a AND b IS NOT ? AND c IS NULL") == (
        "WHERE a IS NOT DISTINCT FROM %(a)s AND b IS DISTINCT FROM %s AND c IS NULL"
    )


def test_sqlite_plan_hints_are_dropped() -> None:
    assert postgres_text(
        "SELECT 1 FROM runs INDEXED BY runs_status_idx WHERE status = 'x' AND +n.status = 'a'"
    ) == "SELECT 1 FROM runs WHERE status = 'x' AND n.status = 'a'"
    assert postgres_text("FROM s CROSS JOIN notes sup ON sup.id = s.note_id") == (
        "FROM s JOIN notes sup ON sup.id = s.note_id"
    )
    assert postgres_text("FROM a CROSS JOIN b") == "FROM a CROSS JOIN b"


def test_scalar_max_and_min_become_greatest_and_least_aggregates_stay() -> None:
    assert postgres_text("SET x = max(x, :at), y = min(coalesce(y, 0), 3), z = max(z)") == (
        "SET x = greatest(x, %(at)s), y = least(coalesce(y, 0), 3), z = max(z)"
    )


def test_a_json_array_parameter_is_read_as_a_set_of_values() -> None:
    assert postgres_text("WHERE id IN (SELECT value FROM json_each(:ids))") == (
        "WHERE id IN (SELECT value FROM jsonb_array_elements_text(CAST(%(ids)s AS jsonb)))"
    )


def test_a_statement_that_really_differs_carries_its_postgresql_text_and_derivation() -> None:
    statement = Statement(
        "INSERT OR REPLACE INTO t (a) VALUES (:a)",
        postgres="INSERT INTO t (a, b) VALUES (:a, :b) ON CONFLICT (a) DO NOTHING",
        derive=lambda given: {"b": given["a"] * 2},
    )
    assert statement == "INSERT OR REPLACE INTO t (a) VALUES (:a)"  # what SQLite runs
    assert postgres_text(statement) == (
        "INSERT INTO t (a, b) VALUES (%(a)s, %(b)s) ON CONFLICT (a) DO NOTHING"
    )
    assert postgres_params(statement, {"a": 2}) == {"a": 2, "b": 4}
    assert postgres_params("SELECT ?", (1,)) == (1,)


def test_search_text_is_quoted_as_lexemes() -> None:
    assert tsvector_text("Ruff ruff, then pytest") == ("'ruff':1,2 'then':3 'pytest':4", 4)
    assert fts5_to_tsquery('"ruff" "pytest"') == "'ruff' & 'pytest'"
    assert fts5_to_tsquery('"ruff" OR "it\'s"') == "'ruff' | ('it' <-> 's')"
    assert fts5_to_tsquery('"a""b"') == "('a' <-> 'b')"


def test_instr_is_strpos_with_the_same_arguments() -> None:
    assert postgres_text("WHERE instr(lower(error), :p) > 0") == (
        "WHERE strpos(lower(error), %(p)s) > 0"
    )
    assert postgres_text("SELECT 'instr(x)'") == "SELECT 'instr(x)'"
