"""Memory config validation (definition-time errors, no silent no-ops) and the pure block
builder (byte cap, binary-search cut at a code point, accounting)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.memory.block import (
    ADVISORY_LINE,
    TRUNCATION_MARKER,
    build_block,
    longest_prefix_within,
    utf8_len,
)
from engine.memory.memory_config import MemoryConfig, resolve_memory
from engine.memory.passages import GAP, PASSAGE_BYTES, passage
from engine.memory.recall_items import RecallItem
from engine.memory.tag_rules import write_tags_for
from store.errors import InvalidInputError


def test_valid_config_defaults_and_namespaces() -> None:
    config = MemoryConfig(banks=["code-review", "code-review", "user-ana"], tags=["branch:main"])
    assert config.banks == ("code-review", "user-ana")
    assert config.namespaces == ("workflow:code-review", "user:ana")
    assert config.recall == "auto" and config.effective_budget == 2048
    assert config.is_active
    assert config.query_for("the prompt") == "the prompt"
    assert MemoryConfig(bank="x", recall=" fixed query ").query_for("p") == "fixed query"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({}, "no bank"),
        ({"bank": "x", "banks": ["y"]}, "either bank or banks"),
        ({"banks": []}, "empty list"),
        ({"bank": "x", "recall": "off"}, "would do nothing"),
        ({"bank": "x", "retain_status": "pending"}, "retain is off"),
        ({"bank": "x", "recall": "off", "retain": "on-complete", "budget_bytes": 500},
         "neither recall, primers nor tools"),
        ({"bank": "x", "tags": ["run:r-1"]}, "not a stable tag"),
        ({"bank": "x", "tags": ["branch:"]}, "not a stable tag"),
        ({"bank": "x", "tags": ["branch:a b"]}, "not a stable tag"),
        ({"bank": "x", "tags": ["source:robot"]}, "not a stable tag"),
        ({"bank": "x", "tags": ["branch:" + "x" * 130]}, "longer than 128"),
        ({"bank": "x", "tags": [f"stream:s{i}" for i in range(17)]}, "at most 16"),
        ({"bank": "x", "budget_bytes": 0}, "budget_bytes"),
        ({"bank": "x", "retain": "always"}, "retain must be"),
        ({"bank": "x", "tools": "yes"}, "tools must be"),
        ({"bank": "bad bank"}, "whitespace"),
    ],
)
def test_invalid_or_ineffective_config_fails_at_definition(kwargs: dict, fragment: str) -> None:
    with pytest.raises(InvalidInputError, match=fragment):
        MemoryConfig(**kwargs)


def test_task_config_replaces_workflow_config() -> None:
    inherited = MemoryConfig(bank="shared", tags=["branch:main"])
    own = MemoryConfig(bank="mine")
    assert resolve_memory(None, inherited) is inherited
    assert resolve_memory(own, inherited) is own  # replaced, not merged: no tags inherited
    assert resolve_memory(False, inherited) is None
    assert resolve_memory({"bank": "d", "tools": True}, None) == MemoryConfig(bank="d", tools=True)
    with pytest.raises(InvalidInputError):
        resolve_memory({"bank": "d", "colour": "red"}, None)


def test_write_tags_add_source_and_keep_the_limit() -> None:
    plain = "workflow:x"
    assert write_tags_for(plain, ("branch:main",), ["scope:main"], "run") == (
        "branch:main", "scope:main", "source:run")
    assert write_tags_for(plain, (), ["source:chat"], "run") == ("source:chat",)
    with pytest.raises(InvalidInputError):
        write_tags_for(plain, tuple(f"stream:s{i}" for i in range(16)), [], "run")


def _item(i: int, text: str) -> RecallItem:
    return RecallItem(f"note:{i}", "note", "workflow:x", None, text, 10.0 - i, ("x",))


def test_block_keeps_rank_order_and_accounts_bytes() -> None:
    items = [_item(i, f"lesson number {i}") for i in range(3)]
    block = build_block(items, 2048)
    assert block.text is not None
    lines = block.text.split("\n")
    assert lines[0] == ADVISORY_LINE
    assert lines[1:] == ["[workflow:x]", *(f"- lesson number {i}" for i in range(3))]
    assert block.bytes_used == utf8_len(block.text)
    assert block.item_ids == ("note:0", "note:1", "note:2") and not block.truncated


def test_a_bank_heads_each_run_of_its_items_and_facts_show_their_key() -> None:
    other = RecallItem("fact:workflow:y/deploy.cmd", "fact", "workflow:y", "deploy.cmd",
                       "make deploy", 5.0)
    block = build_block([_item(0, "first"), other, _item(1, "again")], 2048)
    assert block.text is not None
    assert block.text.split("\n")[1:] == [
        "[workflow:x]", "- first", "[workflow:y]", "- deploy.cmd: make deploy",
        "[workflow:x]", "- again"]


def test_a_long_note_shows_the_passage_around_its_matched_words() -> None:
    filler = "This paragraph describes the history of the project in detail. " * 6
    text = filler + "Canary deploys roll back automatically when errors rise. " + filler
    item = RecallItem("note:long", "note", "workflow:x", None, text, 1.0, ("canari", "rollback"))
    shown, cut = passage(text, item.matched_terms)
    assert cut and shown.startswith(GAP) and shown.endswith(GAP)
    assert "Canary deploys roll back automatically" in shown
    assert utf8_len(shown) <= PASSAGE_BYTES
    block = build_block([item], 2048)
    assert block.text is not None and shown in block.text and block.included[0].passage
    short, cut = passage("Short note.", ("short",))
    assert short == "Short note." and not cut
    semantic_only, cut = passage(text, ())  # found by meaning: its beginning
    assert cut and semantic_only.startswith("This paragraph") and semantic_only.endswith(GAP)


def test_more_evidence_fits_a_block_as_passages() -> None:
    long_text = ("Background sentence about something else entirely. " * 20
                 + "The answer is that payments-api uses Postgres 15. "
                 + "Another unrelated closing sentence. " * 10)
    items = [RecallItem(f"note:{i}", "note", "workflow:x", None, long_text, 10.0 - i,
                        ("payment", "postgr")) for i in range(8)]
    block = build_block(items, 2048)
    assert len(block.included) >= 5  # whole notes: one would fit
    assert all("payments-api uses Postgres 15" in e.item.text for e in block.included)
    assert block.text is not None and block.text.count("payments-api uses Postgres 15") >= 5


def test_last_item_is_cut_at_a_code_point_with_a_marker() -> None:
    items = [_item(0, "🔥" * 40), _item(1, "é" * 400), _item(2, "never shown")]
    block = build_block(items, 400)
    assert block.text is not None and block.truncated
    assert block.bytes_used <= 400 and block.bytes_used == utf8_len(block.text)
    assert block.text.endswith(TRUNCATION_MARKER)
    assert block.item_ids == ("note:0", "note:1")
    assert block.included[1].truncated and [i.id for i in block.omitted] == ["note:2"]
    block.text.encode("utf-8").decode("utf-8")  # never a split character


def test_nothing_fits_gives_no_block() -> None:
    assert build_block([], 2048).text is None
    tiny = build_block([_item(0, "x" * 500)], utf8_len(ADVISORY_LINE) + 10)
    assert tiny.text is None and [i.id for i in tiny.omitted] == ["note:0"]


@given(st.text(max_size=300), st.integers(min_value=0, max_value=700))
def test_longest_prefix_is_maximal(text: str, limit: int) -> None:
    n = longest_prefix_within(text, limit)
    assert utf8_len(text[:n]) <= limit or n == 0
    if n < len(text):
        assert utf8_len(text[: n + 1]) > limit


@given(st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=8),
       st.integers(min_value=128, max_value=1500))
def test_block_never_exceeds_budget(texts: list[str], budget: int) -> None:
    block = build_block([_item(i, t) for i, t in enumerate(texts)], budget)
    assert block.bytes_used <= budget
    if block.text is not None:
        assert utf8_len(block.text) == block.bytes_used


def test_a_shortened_lesson_says_so_and_keeps_whole_words() -> None:
    from engine.memory.memory_tools import first_words

    assert first_words("one two three", 5) == "one two three"
    cut = first_words("alpha beta gamma delta", 2)
    assert cut == "alpha beta …"
