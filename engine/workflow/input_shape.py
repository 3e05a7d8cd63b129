"""What a workflow's input looks like, in one line, for the error that rejects a run's input.

``{"change": string, "repository"?: string}``: a field marked ``?`` may be left out. Built from
the input model's JSON Schema (pure; nested models are named by their title, not expanded).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

MAX_SHAPE_CHARS = 240
"""Longer shapes are cut with an ellipsis: the error stays one readable line."""

SCALARS = {"string": "string", "integer": "integer", "number": "number", "boolean": "true|false",
           "null": "null"}


def _type_of(schema: dict[str, Any]) -> str:
    """One field's type as a short word: ``string``, ``[string]``, ``a|b``, a model's title."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "enum" in schema:
        return "|".join(repr(value) if isinstance(value, str) else str(value)
                        for value in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return "|".join(_type_of(option) for option in schema[key])
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        return f"[{_type_of(items)}]" if isinstance(items, dict) else "[…]"
    if kind == "object":
        return "object"
    if isinstance(kind, list):
        return "|".join(SCALARS.get(str(k), str(k)) for k in kind)
    return SCALARS.get(str(kind), "any")


def input_shape(model: type[BaseModel]) -> str:
    """``model``'s fields as a JSON-like line: names quoted, optional ones marked ``?``."""
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    fields = [
        f'"{name}"{"" if name in required else "?"}: {_type_of(field)}'
        for name, field in schema.get("properties", {}).items()
    ]
    shape = "{" + ", ".join(fields) + "}"
    return shape if len(shape) <= MAX_SHAPE_CHARS else shape[: MAX_SHAPE_CHARS - 2] + "…}"
