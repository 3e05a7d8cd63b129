"""The one-line input shape a rejected run input names (engine/workflow/input_shape.py)."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from engine import Workflow
from engine.workflow.input_shape import MAX_SHAPE_CHARS, input_shape
from store.errors import InvalidInputError


class Limits(BaseModel):
    tokens: int


class Everything(BaseModel):
    goal: str
    files: list[str] = Field(default_factory=list)
    depth: int | None = None
    mode: Literal["fast", "careful"] = "fast"
    limits: Limits | None = None
    strict: bool = False
    extra: dict[str, float] = Field(default_factory=dict)


def test_required_fields_are_plain_and_optional_ones_are_marked() -> None:
    assert input_shape(Everything) == (
        '{"goal": string, "files"?: [string], "depth"?: integer|null, '
        '"mode"?: \'fast\'|\'careful\', "limits"?: Limits|null, "strict"?: true|false, '
        '"extra"?: object}')


def test_a_model_with_many_fields_is_cut_to_one_line() -> None:
    many = type("Many", (BaseModel,), {"__annotations__": {f"field_{i}": str for i in range(40)}})
    shape = input_shape(many)
    assert len(shape) == MAX_SHAPE_CHARS and shape.endswith("…}")


def test_the_rejection_names_the_field_and_what_the_input_takes() -> None:
    workflow = Workflow("shapes", input_model=Everything)
    with pytest.raises(InvalidInputError) as caught:
        workflow.parse_input({"files": ["a.py"]})
    message = str(caught.value)
    assert message.startswith("Input for workflow 'shapes' is invalid at goal: Field required; ")
    assert message.endswith(f"it takes {input_shape(Everything)}.")
