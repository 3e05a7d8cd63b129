"""The search policy shared by note search and recall: words, literal FTS5 quoting, the
common-word plans and the scores, tested directly (no database beyond an in-memory FTS5 table)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import InvalidInputError
from store.search_policy import (
    RANK_ALL_MAX_DOCS,
    RECALL_COMMON_DF,
    bm25,
    density_scores,
    fold,
    fts_literal,
    idf,
    match_all,
    match_any,
    plan_recall,
    plan_search,
    prompt_terms,
    query_terms,
    scored_words,
)


def test_terms_are_folded_deduplicated_and_literal() -> None:
    assert query_terms('Ruff AND ruff OR "mypy" body:* NEAR(x) Ünïcode') == (
        "ruff", "and", "or", "mypy", "body", "near", "x", "unicode",
    )
    assert fts_literal('say "hi"') == '"say ""hi"""'
    assert match_all(["a", "b"]) == '"a" "b"'
    assert match_any(["a", 'b"c']) == '"a" OR "b""c"'
    assert fold("Crème") == "creme"


def test_prompt_terms_skip_stop_words_and_single_letters() -> None:
    assert prompt_terms('Run "pytest" -x; OR NEAR(a b) 🔥 Ünïcode the of') == (
        "run", "pytest", "near", "unicode")
    assert prompt_terms("the a of I") == ()


def test_a_query_without_words_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="no words"):
        query_terms(' *:"() - \x00 ')


def test_query_terms_stop_at_sixteen() -> None:
    words = [f"w{i}" for i in range(40)]
    assert query_terms(" ".join(words)) == tuple(words[:16])
    assert prompt_terms(" ".join(words)) == tuple(words[:16])


def test_scored_words_fold_like_the_index() -> None:
    assert scored_words("Crème BRÛLÉE, ok_go 42") == ["creme", "brulee", "ok", "go", "42"]
    assert scored_words("x " * 10_000)[-1] == "x" and len(scored_words("x " * 10_000)) == 4096


def test_plan_drops_common_words_unless_every_word_is_common() -> None:
    counts = {"rare": 3, "common": 1001, "mid": 1000}
    mixed = plan_search(["rare", "common", "mid"], counts, common_df=1000)
    assert (mixed.match_query, mixed.dropped, mixed.bm25) == ('"rare" "mid"', ("common",), True)
    only_common = plan_search(["common"], counts, common_df=1000)
    assert (only_common.match_query, only_common.dropped, only_common.bm25) == (
        '"common"', (), False
    )
    # An unknown count never hides results: it is treated as rare.
    assert plan_search(["unseen", "common"], counts, common_df=1000).match_query == '"unseen"'


def test_recall_plan_drops_common_terms_or_pools_them() -> None:
    common = RECALL_COMMON_DF + 1  # what the capped probe reports for a common word
    terms = ("parser", "flaky", "pytest", "nothing", "w")
    plan = plan_recall(
        terms, {"parser": common, "flaky": 40, "pytest": RECALL_COMMON_DF, "nothing": 0, "w": 600}
    )
    # Rarest first; a word no note holds is searched in facts only.
    assert plan.note_terms == ("flaky", "w", "pytest") and plan.dropped == ("parser",)
    assert plan.newest_pool == (RANK_ALL_MAX_DOCS < 40 + 600 + RECALL_COMMON_DF)
    assert plan.fact_terms == ("flaky", "w", "pytest", "nothing")
    assert plan_recall(("a1", "b1", "c1"), {"a1": 1000, "b1": 900, "c1": 500}).newest_pool
    one = plan_recall(("flaky", "pytest"), {"flaky": 40, "pytest": 999}, max_terms=1)
    assert one.note_terms == ("flaky",)
    only_common = plan_recall(("test", "run", "fix", "code"), dict.fromkeys(
        ("code", "fix", "run", "test"), common))
    assert only_common.note_terms == ("test", "run", "fix") and only_common.newest_pool
    assert only_common.dropped == ("code",)
    absent = plan_recall(("x1",), {"x1": 0})
    assert (absent.note_terms, absent.newest_pool, absent.fact_terms) == ((), False, ("x1",))


def test_density_scores_prefer_more_occurrences_in_shorter_bodies() -> None:
    scores = density_scores(
        ["deploy deploy now", "deploy now", "we deploy on a very long list of other days"],
        ["deploy"],
    )
    assert scores[0] > scores[1] > scores[2] > 0
    assert density_scores(["Crème brûlée"], ["creme"])[0] > 0
    assert density_scores([], ["deploy"]) == []


def test_bm25_prefers_rarer_and_more_frequent_terms() -> None:
    weights = {"flaky": idf(10, 1000), "test": idf(900, 1000)}
    assert weights["flaky"] > weights["test"] > 0
    rare = bm25(["flaky", "fix"], weights, 2.0)
    common = bm25(["test", "fix"], weights, 2.0)
    twice = bm25(["flaky", "flaky"], weights, 2.0)
    assert twice > rare > common > 0
    assert bm25(["other"], weights, 1.0) == 0
    assert idf(5000, 1000) >= 0


_fts = sqlite3.connect(":memory:")
_fts.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
_fts.execute("INSERT INTO t (body) VALUES ('and or not near body x y')")


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=60))
def test_any_user_text_is_never_fts_syntax(text: str) -> None:
    try:
        terms = query_terms(text)
    except InvalidInputError:
        return
    # Must never raise "fts5: syntax error" (or any other error), in either query shape.
    _fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (match_all(terms),)).fetchall()
    _fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (match_any(terms),)).fetchall()
