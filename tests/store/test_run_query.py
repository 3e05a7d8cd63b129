"""The run query language's pure parser and compiler: what parses to what, the one sentence
each bad query gets, and the index plan SQLite picks for the compiled SQL."""

from __future__ import annotations

import pytest

from store.db.sqlite.sqlite_database import SqliteDatabase
from store.errors import InvalidInputError
from store.read.run_query import All, Condition, Either, Not, Word, parse_query
from store.read.run_query_sql import (
    ERROR_RUNS,
    compile_query,
    page_statement,
    top_level_filter,
)
from store.workspace.layout import Workspace

NOW = 1_767_225_600_000 + 12 * 3_600_000  # 2026-01-01T12:00Z
DAY = 86_400_000


def tree(text: str) -> object:
    return parse_query(text, NOW).tree


def test_conditions_joined_by_space_and_or_not_with_precedence() -> None:
    assert tree("status = failed workflow = x") == All((
        Condition("status", "=", ("failed",)), Condition("workflow", "=", ("x",)),
    ))
    assert tree("a OR b c") == Either((Word("a"), All((Word("b"), Word("c")))))
    assert tree("NOT (a OR b)") == Not(Either((Word("a"), Word("b"))))
    assert tree("not a and b") == All((Not(Word("a")), Word("b")))
    assert tree("") is None and tree("   ") is None


def test_values_are_read_by_the_field_kind() -> None:
    assert tree("tokens > 1.5M") == Condition("tokens", ">", (1_500_000,))
    assert tree("cost >= $0.25") == Condition("cost", ">=", (0.25,))
    assert tree("age < 90s") == Condition("age", "<", (90_000,))
    assert tree("created > -2h") == Condition("created", ">", (NOW - 7_200_000,))
    assert tree("created > 12h") == Condition("created", ">", (NOW - 43_200_000,))
    assert tree("created >= today") == Condition("created", ">=", (NOW - 12 * 3_600_000,))
    day = NOW - 12 * 3_600_000
    assert tree("created = 2026-01-01") == Condition(
        "created", "=", (day, day + DAY), whole_day=True
    )
    assert tree("finished < 2026-01-01T10:30Z") == Condition(
        "finished", "<", (day + 37_800_000,)
    )
    assert tree("gen IN (1, 2)") == Condition("gen", "in", (1, 2))
    assert tree("input.ticket.id = 7") == Condition("input", "=", (7,), ("ticket", "id"))
    assert tree("input.name = 'a b'") == Condition("input", "=", ("a b",), ("name",))
    assert tree('error:"timed out"') == Condition("error", "~", ("timed out",))
    assert tree("text = pytest") == Condition("text", "~", ("pytest",))
    assert tree("STATUS:Failed") == Condition("status", "=", ("failed",))
    assert tree("id = r-1") == Condition("run", "=", ("r-1",))
    assert tree("started:2026-01-01T10:30") == Condition("started", "=", (day + 37_800_000,))
    assert tree("model NOT IN (a, b)") == Condition("model", "not in", ("a", "b"))
    assert tree('"status = x"') == Word("status = x")


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("stauts = failed", "'stauts' is not a field (did you mean status?); fields are run,"),
        ("status = done", "status takes one of pending, running, finished, failed, cancelled, "
                          "handed-off, stale, queued, not 'done'."),
        ("cost > cheap", "cost takes a dollar amount such as 0.50 or $2, not 'cheap'."),
        ("tokens > lots", "tokens takes a number such as 5000, 200k or 1.5M, not 'lots'."),
        ("created > soon", "created takes a date (2026-01-01), a time (2026-01-01T10:30) or a "
                           "time ago (-7d, 12h, today), not 'soon'."),
        ("age < 5", "age takes a duration such as 90s, 5m, 2h or 7d, not '5'."),
        ("cost ~ 3", "cost takes =, !=, >, >=, <, <= or BETWEEN, not ~."),
        ("error > x", "error takes ~ or !~, not >."),
        ("status = failed)", "The query closes a parenthesis at character 16 that was never "
                             "opened."),
        ("(status = failed", "The parenthesis opened at character 1 of the query is never "
                             "closed."),
        ("status = 'failed", "The quote opened at character 10 of the query is never closed."),
        ("status =", "The query needs a value after status =."),
        ("status = failed AND", "The query ends where a condition should be"),
        ("()", "The query has ')' at character 2 where a condition should be."),
        ("(gen > 1 AND)", "The query has ')' at character 13 where a condition should be."),
        # Past a 64-bit integer, binding the value would fail (OverflowError) in the search.
        ("tokens > " + "9" * 30, "tokens takes smaller values than '" + "9" * 30 + "'."),
        ("tokens > " + "9" * 400, "tokens takes smaller values than '" + "9" * 40 + "…'."),
        ("age > " + "9" * 400 + "d", "age takes smaller values than '"),
        ("gen = 9223372036854775808", "gen takes smaller values than '9223372036854775808'."),
        ("input.n > " + "9" * 30, "input takes smaller values than '"),
        ("cost > " + "9" * 400, "cost takes smaller values than '"),
        ("OR status = failed", "OR at character 1 needs a condition before it."),
        ("status IN failed", "status IN takes a list in parentheses, such as (a, b)."),
        ("gen IN (1 2)", "The list after gen IN needs a comma or a closing parenthesis."),
        ("gen BETWEEN 1 2", "gen BETWEEN needs AND between its two values."),
        ("input = x", "input needs a field name made of letters, digits, _ and -, such as "
                      "input.repo, not 'input'."),
        ("input.n > big", "input.n > compares numbers; 'big' is not one."),
        ("status.x = 1", "status has no fields of its own ('status.x')."),
        ('text ~ " "', "text ~ needs some text to look for."),
        ("x" * 2001, "A query may be at most 2000 characters long."),
    ],
)
def test_a_bad_query_gets_one_sentence_that_says_where(text: str, sentence: str) -> None:
    with pytest.raises(InvalidInputError) as raised:
        parse_query(text, NOW)
    message = str(raised.value)
    assert message.startswith(sentence), message
    assert message.count(". ") == 0 and message.endswith((".", "?")), message


def test_data_never_reaches_the_sql_text() -> None:
    hostile = "x'); DROP TABLE runs; --"
    compiled = compile_query(parse_query(f'workflow = "{hostile}" error ~ "{hostile}"', NOW), NOW)
    assert "DROP" not in compiled.where.sqlite
    assert hostile in compiled.params.values() and hostile.lower() in compiled.params.values()


def test_the_scan_window_is_the_rest_of_an_and() -> None:
    narrowed = top_level_filter(parse_query("workflow = x AND text ~ y cost > 1", NOW))
    assert narrowed is not None and narrowed.tree == All((
        Condition("workflow", "=", ("x",)), Condition("cost", ">", (1.0,)),
    ))
    assert top_level_filter(parse_query("text ~ y", NOW)) is None
    assert top_level_filter(parse_query("workflow = x OR text ~ y", NOW)) is None
    assert top_level_filter(parse_query("workflow = x NOT (text ~ y)", NOW)) is None


@pytest.mark.parametrize(
    ("text", "index"),
    [
        ("", "runs_created_idx"),
        ("workflow = code-review", "runs_workflow_created_idx"),
        ("agent = claude-code", "attempts_agent_idx"),
        ("model = gpt-5.1", "usage_hours_model_idx"),
        ("model = gpt-5.1", "attempts_model_idx"),
        ("error ~ timeout", "attempts_failed_idx"),
        ("error ~ timeout", "nodes_failed_idx"),
    ],
)
async def test_the_compiled_sql_reads_through_its_indexes(
    workspace: Workspace, text: str, index: str
) -> None:
    db = await SqliteDatabase.open(workspace)
    try:
        compiled = compile_query(parse_query(text, NOW), NOW)
        plan = " ".join(
            str(tuple(row)) for row in await db.fetch_all(
                f"EXPLAIN QUERY PLAN {page_statement(compiled)}",
                {**compiled.params, "limit": 50, "offset": 0},
            )
        )
        for error in compiled.errors:  # read once before the page (and the count)
            plan += " ".join(str(tuple(row)) for row in await db.fetch_all(
                f"EXPLAIN QUERY PLAN {ERROR_RUNS}", {"needle": error.needle}))
        assert index in plan, plan
        # No table is read whole (a partial index scanned is only what failed).
        assert "SCAN attempts'" not in plan and "SCAN usage_hours'" not in plan, plan
        assert "SCAN nodes'" not in plan, plan
    finally:
        await db.close()
