"""The search policy shared by note search and recall: terms as the porter index has them,
literal FTS5 quoting, BM25, the weak-match guard, question echo, the sentence fallback and the
fusion of rankings, tested directly (no database beyond an in-memory FTS5 table)."""

from __future__ import annotations

import math
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import InvalidInputError
from store.search.search_policy import (
    ECHO_PENALTY,
    WEAK_MIN_NOTES,
    admitted,
    bm25,
    bm25_weight,
    fold,
    fts_literal,
    idf,
    index_terms,
    is_question_echo,
    match_all,
    match_any,
    needs_fallback,
    normalised_fusion,
    prompt_terms,
    prompt_words,
    query_terms,
    reciprocal_rank_fusion,
    weak_terms,
)


def test_terms_are_folded_stemmed_deduplicated_and_literal() -> None:
    assert query_terms('Ruff AND ruff OR "mypy" body:* NEAR(x) Ünïcode') == (
        "ruff", "and", "or", "mypi", "bodi", "near", "x", "unicod",
    )
    assert query_terms("opening opened opens") == ("open",)
    assert fts_literal('say "hi"') == '"say ""hi"""'
    assert match_all(["a", "b"]) == '"a" "b"'
    assert match_any(["a", 'b"c']) == '"a" OR "b""c"'
    assert fold("Crème") == "creme"


def test_prompt_terms_skip_stop_words_before_stemming() -> None:
    assert prompt_terms('Run "pytest" -x; OR NEAR(a b) 🔥 Ünïcode the of') == (
        "run", "pytest", "near", "unicod")
    assert prompt_terms("the a of I") == ()
    # "was" and "does" are stop words as typed, even though their stems are not.
    assert prompt_terms("what was researched does it") == ("research",)
    assert prompt_words("Researching the OPENING") == ("researching", "opening")


def test_a_query_without_words_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="no words"):
        query_terms(' *:"() - \x00 ')


def test_query_terms_stop_at_sixteen() -> None:
    words = [f"w{i}" for i in range(40)]
    assert query_terms(" ".join(words)) == tuple(words[:16])
    assert len(prompt_terms(" ".join(words))) == 40


def test_index_terms_fold_and_stem_every_word() -> None:
    assert index_terms("Crème BRÛLÉE, ok_go 42 dropped") == [
        "creme", "brule", "ok", "go", "42", "drop"]


def test_bm25_prefers_rarer_and_more_frequent_terms() -> None:
    weights = {"flaky": idf(10, 1000), "test": idf(900, 1000)}
    assert weights["flaky"] > weights["test"] > 0
    rare = bm25(["flaky", "fix"], weights, 2.0)
    common = bm25(["test", "fix"], weights, 2.0)
    twice = bm25(["flaky", "flaky"], weights, 2.0)
    assert twice > rare > common > 0
    assert bm25(["other"], weights, 1.0) == 0
    assert idf(5000, 1000) >= 0
    assert idf(0, 10) == pytest.approx(math.log(1 + 10.5 / 0.5))
    assert bm25_weight(1, 10, 10) == pytest.approx(1.0)  # tf 1 at average length


def test_weak_terms_are_those_in_a_large_share_of_the_scope() -> None:
    counts = {"alice": 80, "deploy": 12, "canary": 2}
    assert weak_terms(counts, 100) == {"alice"}
    # A tiny bank: nothing is weak until a term is in more than WEAK_MIN_NOTES notes.
    assert weak_terms({"x": WEAK_MIN_NOTES}, 6) == frozenset()
    assert admitted(["alice", "canary"], frozenset({"alice"}))
    assert not admitted(["alice"], frozenset({"alice"}))
    assert not admitted([], frozenset())


def test_question_echo_needs_a_question_repeating_most_terms() -> None:
    terms = ("deploi", "canari", "rollback")
    assert is_question_echo(terms, ["deploi", "canari"], "How do we deploy a canary?")
    assert not is_question_echo(terms, ["deploi", "canari"], "Deploy the canary at 5%.")
    assert not is_question_echo(terms, ["deploi"], "Deploy what?")
    assert 0 < ECHO_PENALTY < 1


def test_an_answer_ending_in_a_counter_question_is_no_echo() -> None:
    terms = prompt_terms("Which canary deploy rollback policy do you use?")
    matched = [t for t in terms if t != "us"]
    # The answer's own sentence holds the query's terms: it answers, then asks back.
    answer = "We deploy the canary with an automatic rollback policy. Do you use canary deploys?"
    assert not is_question_echo(terms, matched, answer)
    # Only the question sentence holds them: it restates the question.
    echo = "Anyone know? Which canary deploy rollback policy do we use?"
    assert is_question_echo(terms, matched, echo)


def test_fallback_when_all_words_found_fewer_than_the_limit() -> None:
    assert needs_fallback(0, 10) and needs_fallback(9, 10) and not needs_fallback(10, 10)


def test_fusions() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60)
    assert max(fused, key=fused.__getitem__) == "a"
    assert fused["c"] > fused["b"]
    weighted = reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0, 2.0])
    assert weighted["b"] == pytest.approx(2 * weighted["a"])
    norm = normalised_fusion([{"a": 10.0, "b": 5.0, "c": 0.0}, {"c": 0.9, "b": 0.8, "a": 0.1}])
    assert norm["b"] > norm["a"] and norm["b"] > norm["c"]
    assert normalised_fusion([{}, {"x": 0.3}]) == {"x": 1.0}


_fts = sqlite3.connect(":memory:")
_fts.execute(
    "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')"
)
_fts.execute("INSERT INTO t (body) VALUES ('and or not near body x y')")


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=60))
def test_any_user_text_is_never_fts_syntax(text: str) -> None:
    try:
        query_terms(text)
    except InvalidInputError:
        return
    words = prompt_words(text) or ("x",)
    # Must never raise "fts5: syntax error" (or any other error), in either query shape.
    _fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (match_all(words),)).fetchall()
    _fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (match_any(words),)).fetchall()


def test_keyword_weight_drops_when_its_best_candidates_match_one_query_term() -> None:
    from store.search.search_policy import keyword_share

    assert keyword_share([1, 1, 1, 3], 4, 2, 0.5, 0.0) == 0.5  # only the first three count
    assert keyword_share([1, 2], 4, 2, 0.5, 0.0) == 1.0
    assert keyword_share([1], 1, 2, 0.5, 0.0) == 1.0  # a one-word query matched in full
    assert keyword_share([], 3, 2, 0.5, 0.0) == 1.0
    assert keyword_share([1], 3, 0, 0.5, 0.0) == 1.0  # the rule off


def test_keyword_weight_can_ask_for_a_share_of_the_query_terms() -> None:
    from store.search.search_policy import keyword_share

    assert keyword_share([2, 2], 6, 0, 0.5, 0.5) == 0.5  # 2 of 6 terms: under half
    assert keyword_share([3], 6, 0, 0.5, 0.5) == 1.0
    assert keyword_share([1], 1, 0, 0.5, 0.5) == 1.0
