"""Schema-valid example values for any JSON Schema (pure; used by the simulated agent).

Walks the schema pydantic produces (objects, arrays, enums, consts, anyOf/oneOf, $ref/$defs,
numeric and length bounds, common string formats) drawing choices from a seeded ``Random``.
"""

from __future__ import annotations

import math
import random
import uuid
from typing import Any

_WORDS = (
    "cache",
    "review",
    "module",
    "handler",
    "retry",
    "budget",
    "schema",
    "parser",
    "token",
    "window",
    "latency",
    "memory",
    "queue",
    "worker",
    "index",
    "commit",
    "branch",
    "test",
    "config",
    "output",
    "signal",
    "planner",
    "summary",
    "context",
    "agent",
    "workflow",
)


def _sentence(rng: random.Random, words: int) -> str:
    chosen = [rng.choice(_WORDS) for _ in range(max(1, words))]
    return " ".join(chosen).capitalize()


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while "$ref" in schema and seen < 32:
        ref = str(schema["$ref"])
        node: Any = root
        for part in ref.lstrip("#/").split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        schema = {**node, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    return schema


def example_for(
    schema: dict[str, Any],
    rng: random.Random,
    *,
    root: dict[str, Any] | None = None,
    name: str = "",
    hints: dict[str, Any] | None = None,
    depth: int = 0,
) -> Any:
    """A value satisfying ``schema``. ``hints`` maps property names to forced values (the
    simulated agent uses it to make ``done`` flags turn true over a loop)."""
    root = root if root is not None else schema
    schema = _resolve(schema, root)
    if hints and name in hints:
        return hints[name]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(list(schema["enum"]))
    if "default" in schema and rng.random() < 0.3:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if _resolve(o, root).get("type") != "null"]
            choice = rng.choice(options or schema[key])
            return example_for(choice, rng, root=root, name=name, hints=hints, depth=depth)
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part, root))
        return example_for(merged, rng, root=root, name=name, hints=hints, depth=depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        result: dict[str, Any] = {}
        properties: dict[str, Any] = schema.get("properties", {})
        for prop, sub in properties.items():
            result[prop] = example_for(sub, rng, root=root, name=prop, hints=hints, depth=depth + 1)
        extra = schema.get("additionalProperties")
        if not properties and isinstance(extra, dict) and depth < 4:
            for index in range(rng.randint(1, 3)):
                result[f"{rng.choice(_WORDS)}_{index}"] = example_for(
                    extra, rng, root=root, hints=hints, depth=depth + 1
                )
        return result
    if kind == "array":
        if "prefixItems" in schema:
            return [
                example_for(s, rng, root=root, hints=hints, depth=depth + 1)
                for s in schema["prefixItems"]
            ]
        low = int(schema.get("minItems", 1 if depth < 3 else 0))
        high = int(schema.get("maxItems", max(low, 3 if depth < 3 else low)))
        count = rng.randint(low, max(low, high))
        items = schema.get("items", {"type": "string"})
        values = [
            example_for(items, rng, root=root, name=name, hints=hints, depth=depth + 1)
            for _ in range(count)
        ]
        if schema.get("uniqueItems"):
            unique: list[Any] = []
            for value in values:
                if value not in unique:
                    unique.append(value)
            values = unique
        return values
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("integer", "number"):
        return _number_for(schema, rng, integer=kind == "integer")
    if kind == "null":
        return None
    return _string_for(schema, rng, name)


def _string_for(schema: dict[str, Any], rng: random.Random, name: str) -> str:
    fmt = schema.get("format")
    if fmt == "date-time":
        return f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T10:00:00Z"
    if fmt == "date":
        return f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"
    if fmt == "time":
        return "10:00:00"
    if fmt in ("uri", "url"):
        return f"https://example.com/{rng.choice(_WORDS)}"
    if fmt == "email":
        return f"{rng.choice(_WORDS)}@example.com"
    if fmt == "uuid":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    low = int(schema.get("minLength", 0))
    high = int(schema.get("maxLength", max(low, 400)))
    text = _sentence(rng, rng.randint(3, 14)) + "."
    if name in ("id", "name", "key", "file", "path"):
        text = f"{rng.choice(_WORDS)}_{rng.randint(1, 99)}"
    while len(text) < low:
        text += " " + rng.choice(_WORDS)
    return text[:high] if high >= low else text


def _number_for(schema: dict[str, Any], rng: random.Random, *, integer: bool) -> float | int:
    nudge = 1 if integer else 1e-3
    low = float(schema.get("minimum", 0))
    if "exclusiveMinimum" in schema:
        low = float(schema["exclusiveMinimum"]) + nudge
    high = float(schema.get("maximum", low + 100))
    if "exclusiveMaximum" in schema:
        high = float(schema["exclusiveMaximum"]) - nudge
    high = max(low, high)
    if not integer:
        return round(rng.uniform(low, high), 3)

    value = rng.randint(math.ceil(low), max(math.ceil(low), math.floor(high)))
    step = schema.get("multipleOf")
    if isinstance(step, int) and step > 0:
        value = (value // step) * step
        if value < low:
            value += step
    return value
