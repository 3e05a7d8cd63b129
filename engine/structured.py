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


def to_jsonable(value: Any) -> Any:
    """A typed output as plain JSON data (models dumped, lists and dicts walked)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of ``schema`` that OpenAI-style strict structured output accepts, or None when
    the schema does not allow it (:func:`strict_problem` says why).

    Strict mode needs every object to list all its properties as required and to forbid extra
    ones, and knows only some keywords. A schema that already meets that (a pydantic model whose
    fields all lack defaults, for example) gets ``additionalProperties: false`` added where it
    is missing; anything else (optional fields, free-form objects, unsupported keywords) keeps
    its non-strict form.
    """
    return _strict(schema)[0]


def strict_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` cannot be strict (one phrase naming the place), or None when it can."""
    return _strict(schema)[1]


def _strict(schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    def place(path: str) -> str:
        return f"field {path!r}" if path else "the top-level object"

    def walk(node: Any, path: str) -> Any:
        if isinstance(node, list):
            return [walk(item, path) for item in node]
        if not isinstance(node, dict):
            return node
        if node.get("type") == "object" or "properties" in node:
            properties = node.get("properties")
            if not isinstance(properties, dict) or not properties:
                raise _NotStrict(f"{place(path)} is a free-form object (no fixed fields)")
            missing = [name for name in properties if name not in (node.get("required") or [])]
            if missing:
                field = f"{path}.{missing[0]}" if path else missing[0]
                raise _NotStrict(f"field {field!r} is optional (it has a default or may be absent)")
            if node.get("additionalProperties", False) is not False:
                raise _NotStrict(f"{place(path)} allows additional fields")
        unknown = sorted(key for key in node if key not in _STRICT_KEYWORDS)
        if unknown:
            raise _NotStrict(f"{place(path)} uses {unknown[0]!r}, which strict mode does not take")
        maps = ("properties", "$defs", "definitions")
        out = {key: walk(value, path) for key, value in node.items() if key not in maps}
        for key in maps:
            if key in node:
                if not isinstance(node[key], dict):
                    raise _NotStrict(f"{place(path)} has a {key} that is not an object")
                out[key] = {
                    name: walk(sub, name if key != "properties" else
                               (f"{path}.{name}" if path else name))
                    for name, sub in node[key].items()
                }  # fmt: skip
        if node.get("type") == "object" or "properties" in node:
            out["additionalProperties"] = False
        return out

    try:
        result = walk(schema, "")
    except _NotStrict as problem:
        return None, str(problem)
    if not isinstance(result, dict):
        return None, "the schema is not an object"
    return result, None


class _NotStrict(Exception):
    """Raised inside :func:`strict_schema` when a schema cannot be strict."""
