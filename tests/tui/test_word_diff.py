"""The word diff the compare view, the review screen and ``tether compare --node`` show."""

from __future__ import annotations

from tui.word_diff import MAX_WORDS, diff_plain, diff_text, word_diff


def test_changed_words_are_removed_and_added_and_the_rest_kept() -> None:
    diff = word_diff("Run pytest -x before the review.", "Run pytest -q before every review.")
    assert diff_plain(diff) == "Run pytest [--x-]{+-q+} before [-the-]{+every+} review."
    assert (diff.removed, diff.added, diff.same) == (2, 2, False)
    assert diff.summary() == "2 words removed, 2 added"


def test_a_rewritten_sentence_reads_as_one_change_not_word_by_word() -> None:
    diff = word_diff("the cache is cold at the start", "a queue grows at the end")
    assert diff_plain(diff) == "[-the cache is cold-]{+a queue grows+} at the [-start-]{+end+}"


def test_none_and_same_texts() -> None:
    assert word_diff(None, None).same and word_diff("a b", "a b").summary() == "the same"
    assert diff_plain(word_diff(None, "new")) == "{+new+}"


def test_data_is_shown_literally_and_styled_by_change() -> None:
    text = diff_text(word_diff("[bold]x[/] \x1b[31m", "[bold]y[/] \x1b[31m"))
    assert "[bold]" in text.plain and "\x1b" not in text.plain
    assert {str(span.style) for span in text.spans} == {"strike red", "bold green"}


def test_long_texts_are_compared_on_their_first_words_and_say_so() -> None:
    long = " ".join(["w"] * (MAX_WORDS + 10))
    diff = word_diff(long, long + " tail")
    assert diff.cut and diff.same and "first 20,000 words" in diff.summary()
