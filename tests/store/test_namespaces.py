"""Namespace parsing, escaping, validation and bank mapping (pure functions)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.errors import InvalidInputError
from store.memory.namespaces import (
    NAMESPACE_KINDS,
    Namespace,
    bank_to_namespace,
    canonical_namespace,
    escape_id,
    format_namespace,
    parse_namespace,
    unescape_id,
    validate_namespace,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("workflow:code-review", Namespace("workflow", "code-review")),
        ("agent:reviewer", Namespace("agent", "reviewer")),
        ("user:alice", Namespace("user", "alice")),
        ("global:shared", Namespace("global", "shared")),
        ("no-colon", Namespace("global", "no-colon")),
        ("foo:bar", Namespace("global", "foo:bar")),
        ("Workflow:x", Namespace("global", "Workflow:x")),
        ("workflow:a%3Ab%25c", Namespace("workflow", "a:b%c")),
        ("workflow:a:b", Namespace("workflow", "a:b")),
        ("workflow:100%", Namespace("workflow", "100%")),
        ("workflow:%41", Namespace("workflow", "%41")),
        ("workflow:", Namespace("workflow", "")),
    ],
)
def test_parse_namespace(text: str, expected: Namespace) -> None:
    assert parse_namespace(text) == expected


def test_escape_order_percent_first() -> None:
    # Escaping ':' first would turn its '%' into '%25' and break the round trip.
    assert escape_id("a:b%c") == "a%3Ab%25c"
    assert escape_id("%3A") == "%253A"
    assert unescape_id("%253A") == "%3A"
    assert format_namespace(Namespace("global", "foo:bar")) == "global:foo%3Abar"


def test_canonical_form_refuses_control_characters() -> None:
    with pytest.raises(InvalidInputError, match="control character"):
        canonical_namespace(Namespace("user", "a\x1b[2J"))


def test_canonical_form_of_unknown_kind_is_global_with_whole_string() -> None:
    assert canonical_namespace("foo:bar") == "global:foo%3Abar"
    assert canonical_namespace("workflow:code-review") == "workflow:code-review"
    assert canonical_namespace(Namespace("user", "a:b")) == "user:a%3Ab"


any_ids = st.text(st.characters(codec="utf-8"), max_size=40)
ids = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)
namespaces = st.builds(Namespace, st.sampled_from(NAMESPACE_KINDS), any_ids)


@given(namespaces)
def test_round_trip_format_then_parse(namespace: Namespace) -> None:
    assert parse_namespace(format_namespace(namespace)) == namespace


@given(ids)
def test_canonical_is_idempotent(text: str) -> None:
    once = canonical_namespace(text)
    assert canonical_namespace(once) == once
    assert parse_namespace(once) == parse_namespace(text)


@given(any_ids)
def test_escaped_id_never_contains_a_colon(raw: str) -> None:
    assert ":" not in escape_id(raw)
    assert unescape_id(escape_id(raw)) == raw


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("workflow:", "empty id"),
        (" workflow:x", "whitespace"),
        ("workflow:x\n", "control character U+000A"),
        ("workflow:\x1b[31mred", "control character U+001B"),
        ("workflow:a\x00b", "control character U+0000"),
        ("workflow:\udcff", "not valid UTF-8"),
        ("workflow:" + "x" * 300, "limit is 256"),
        ("team:x", "unknown kind 'team'; the kind is one of workflow, agent, user or global"),
        ("Workflow:x", "kinds are lower-case: workflow:"),
        ("GLOBAL:x", "unknown kind 'GLOBAL'"),
        (":x", "unknown kind ''"),
    ],
)
def test_validate_refuses_malformed(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        validate_namespace(text)


def test_validate_accepts_the_documented_example_and_lenient_forms() -> None:
    assert validate_namespace("workflow:code-review") == Namespace("workflow", "code-review")
    assert validate_namespace("project-7") == Namespace("global", "project-7")
    assert validate_namespace("user:ünïcode id") == Namespace("user", "ünïcode id")
    # An id that contains a colon names its kind first.
    assert validate_namespace("global:team:x") == Namespace("global", "team:x")


@pytest.mark.parametrize(
    ("bank", "expected"),
    [
        ("workflow-code-review", Namespace("workflow", "code-review")),
        ("agent-reviewer", Namespace("agent", "reviewer")),
        ("user-alice", Namespace("user", "alice")),
        ("global-shared", Namespace("global", "shared")),
        ("project-7", Namespace("workflow", "project-7")),
        ("agent-", Namespace("workflow", "agent-")),
        ("workflow", Namespace("workflow", "workflow")),
    ],
)
def test_bank_to_namespace(bank: str, expected: Namespace) -> None:
    assert bank_to_namespace(bank) == expected
