"""The supersession circle check, pure: circles of any length are found and named, shared
targets (a diamond) are not circles, and a very long chain needs no recursion."""

from __future__ import annotations

import pytest

from store.errors import InvalidInputError
from store.memory.note_rules import refuse_cycle, supersession_cycle


def test_circles_of_any_length_are_found_and_named() -> None:
    assert supersession_cycle([("n1", "n2"), ("n2", "n1")]) == ["n1", "n2", "n1"]
    assert supersession_cycle([("a", "b"), ("b", "c"), ("c", "a")]) == ["a", "b", "c", "a"]
    long = [(f"n{i}", f"n{(i + 1) % 20_000}") for i in range(20_000)]
    found = supersession_cycle(long)
    assert found is not None and len(found) == 20_001 and found[0] == found[-1]
    with pytest.raises(InvalidInputError, match=r"circle \('n1' -> 'n2' -> 'n1'\)"):
        refuse_cycle(supersession_cycle([("n1", "n2"), ("n2", "n1")]))


def test_chains_and_diamonds_are_not_circles() -> None:
    assert supersession_cycle([]) is None
    assert supersession_cycle([("top", "left"), ("top", "right"), ("left", "base"),
                               ("right", "base")]) is None
    assert supersession_cycle([(f"n{i}", f"n{i + 1}") for i in range(20_000)]) is None
    refuse_cycle(None)
