"""Parsing and validating an agent's answer against a task's output model, and turning typed
outputs back into JSON data (pure functions)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError


class OutputInvalid(Exception):
    """The answer is not a JSON object matching the output model; ``str()`` says why."""


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: the whole text, else the outermost ``{...}`` span (tolerates a
    code fence or a sentence around it). Raises OutputInvalid."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`")
        if stripped.startswith("json"):
            stripped = stripped[4:]
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    start, end = stripped.find("{"), stripped.rfind("}")
    if start != -1 and end > start:
        try:
            return json.loads(stripped[start : end + 1])
        except json.JSONDecodeError as error:
            raise OutputInvalid(f"the answer is not valid JSON ({error.msg}).") from error
    raise OutputInvalid("the answer contains no JSON object.")


def validate_output(model: type[BaseModel], value: Any) -> BaseModel:
    """Validate a parsed value (or JSON text) against ``model``. Raises OutputInvalid."""
    try:
        if isinstance(value, str):
            value = extract_json(value)
        return model.model_validate(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "the object"
        raise OutputInvalid(
            f"it does not match the schema at {where}: {first.get('msg')}."
        ) from error


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of an output model."""
    return model.model_json_schema()


def to_jsonable(value: Any) -> Any:
    """A typed output as plain JSON data (models dumped, lists and dicts walked)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value
