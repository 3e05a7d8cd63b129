"""JSON text columns: :func:`store.model.json_columns.dump_json` writes what ``json.dumps``
with the same options writes, through one C encoder made once, and refuses what JSON cannot
hold with one sentence, a value that holds itself included (the encoder keeps no record of
the containers it is inside between calls)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from store.errors import InvalidInputError
from store.model.json_columns import dump_json, dump_recorded_json

VALUES: list[Any] = [
    None, True, 0, -7, 10**30, 1.5, -0.0, 1e300, "", "é \u2028 \"quoted\" \\ \n\t",
    [], {}, (1, 2), [1, {"b": 2, "a": [True, False, None]}], {"k": "v", 3: 4, 1.5: 2, None: 1},
    {"state": "finished", "attempts": 1, "tokens": {"input_tokens": 10}},
]


@pytest.mark.parametrize("value", VALUES)
def test_the_text_is_json_dumps_compact(value: Any) -> None:
    expected = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert dump_json(value) == expected
    assert dump_recorded_json(value) == expected


def _holding_itself() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


@pytest.mark.parametrize("make", [
    lambda: math.nan, lambda: [math.inf], lambda: {"a": object()}, lambda: {(1,): 2},
    _holding_itself,
])
def test_what_json_cannot_hold_is_refused_and_the_next_value_written(make: Any) -> None:
    with pytest.raises(InvalidInputError, match="cannot be stored as JSON"):
        dump_json(make())
    inner = {"x": 1}
    assert dump_json([inner, inner]) == '[{"x":1},{"x":1}]'  # the same dict twice is no cycle
