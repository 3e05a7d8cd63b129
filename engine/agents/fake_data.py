"""Schema-valid example values for any JSON Schema (pure; used by the simulated agent).

Walks the schema pydantic produces (objects, arrays, enums, consts, anyOf/oneOf, $ref/$defs,
numeric and length bounds, common string formats) drawing choices from a seeded ``Random``.
"""

from __future__ import annotations

import math
import random
import re
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


# Sentence parts for the simulated agent's prose: small templates filled from these lists read
# like short engineering notes ("The retry handler times out under load because ...") rather
# than word salad, and stay deterministic for a seed since every choice goes through ``rng``.
_SUBJECTS = (
    "the retry handler",
    "the cache layer",
    "the config loader",
    "the queue consumer",
    "the schema check",
    "the token budget",
    "the request parser",
    "the worker pool",
    "the search index",
    "the migration step",
    "the rate limiter",
    "the session store",
)
_PROBLEMS = (
    "times out under load",
    "retries without backoff",
    "reads the whole table on every call",
    "holds the write lock too long",
    "skips validation of empty input",
    "swallows the original error",
    "keeps stale entries after a reload",
    "logs the full payload",
    "counts cached tokens twice",
    "starts before its dependencies finish",
)
_REASONS = (
    "because the timeout is shared across retries",
    "because the index on updated_at is missing",
    "when two workers pick up the same item",
    "after the config is reloaded",
    "since the cache key ignores the model name",
    "when the context window passes 200k tokens",
    "because errors are caught too broadly",
    "under a burst of concurrent writes",
)
_ACTIONS = (
    "add jittered backoff to",
    "add a test that covers",
    "log one line per failure in",
    "bound the batch size of",
    "validate the input of",
    "move the slow query out of",
    "document the limits of",
    "add a timeout to",
)
_RESULTS = (
    "p95 latency dropped by a third",
    "the flaky test passes 50 times in a row",
    "no duplicate work was seen in the logs",
    "memory stays flat over a long run",
    "the error now names the failing input",
)
_CHECKS = (
    "run ruff and mypy before pytest",
    "check the cache key before blaming the model",
    "read the stream log before retrying",
    "pin the seed when a test depends on generated data",
    "measure before and after a performance change",
    "keep write transactions short",
)
_TEMPLATES: dict[str, tuple[str, ...]] = {
    "summary": (
        "Reviewed {topic}: {subject} {problem} {reason}.",
        "{Subject} {problem} {reason}; the rest of {topic} looks fine.",
        "Checked {topic}; after the change {result}.",
    ),
    "finding": (
        "{Subject} {problem} {reason}.",
        "In {topic}, {subject} {problem}.",
    ),
    "cause": (
        "{Subject} {problem} {reason}.",
        "{Subject} in {topic} {problem} {reason}.",
    ),
    "lesson": (
        "{Check}.",
        "{Check}; in {topic} {subject} {problem}.",
    ),
    "action": (
        "{Action} {subject} in {topic}.",
        "{Action} {subject} so it no longer {problem}.",
    ),
    "progress": (
        "Reading {topic} to see why {subject} {problem}.",
        "Checking whether {subject} {problem} {reason}.",
        "Comparing {subject} before and after the change in {topic}.",
    ),
    "title": ("{Subject} {problem}",),
    "generic": (
        "{Subject} {problem} {reason}.",
        "{Action} {subject} in {topic}.",
        "After the change to {topic}, {result}.",
        "{Check}.",
    ),
}
_FLAVOURS = (
    ("summar", "summary"),
    ("overview", "summary"),
    ("finding", "finding"),
    ("issue", "finding"),
    ("problem", "finding"),
    ("risk", "finding"),
    ("cause", "cause"),
    ("reason", "cause"),
    ("lesson", "lesson"),
    ("learn", "lesson"),
    ("insight", "lesson"),
    ("fix", "action"),
    ("action", "action"),
    ("recommend", "action"),
    ("step", "action"),
    ("plan", "action"),
    ("todo", "action"),
    ("progress", "progress"),
    ("title", "title"),
    ("headline", "title"),
)


def _flavour(name: str) -> str:
    lowered = name.lower()
    return next((kind for part, kind in _FLAVOURS if part in lowered), "generic")


def _sentence(rng: random.Random, name: str = "", topics: tuple[str, ...] = ()) -> str:
    """One short engineering sentence, flavoured by the field ``name`` and the prompt's words."""
    template = rng.choice(_TEMPLATES[_flavour(name)])
    subject = rng.choice(_SUBJECTS)
    problem = rng.choice(_PROBLEMS)
    action = rng.choice(_ACTIONS)
    check = rng.choice(_CHECKS)
    topic = rng.choice(topics) if topics else f"the {rng.choice(_WORDS)} module"
    text = template.format(
        subject=subject,
        Subject=subject[0].upper() + subject[1:],
        problem=problem,
        reason=rng.choice(_REASONS),
        action=action,
        Action=action[0].upper() + action[1:],
        result=rng.choice(_RESULTS),
        Check=check[0].upper() + check[1:],
        topic=topic,
    )
    return text[0].upper() + text[1:]


_TOPIC = re.compile(r"[A-Za-z][\w-]*(?:[./][\w-]+)+")
"""Words of a prompt worth naming in prose: file names, dotted or slashed identifiers."""


def topics_from(prompt: str, limit: int = 4) -> tuple[str, ...]:
    """The first few distinct file-like words of ``prompt`` (``api.py``, ``store/db``)."""
    found: list[str] = []
    for match in _TOPIC.finditer(prompt):
        word = match.group(0).rstrip(".")
        parts = re.split(r"[./]", word)
        readable = all(len(part) > 1 and re.search("[A-Za-z]", part) for part in parts)
        if readable and len(word) <= 40 and word not in found:
            found.append(word)
            if len(found) == limit:
                break
    return tuple(found)


def _fit(text: str, low: int, high: int) -> str:
    """Cut ``text`` to at most ``high`` characters, at a word boundary when that keeps ``low``."""
    if len(text) <= high:
        return text
    cut = text[:high]
    space = cut.rfind(" ")
    if space >= max(low, 1):
        trimmed = cut[:space].rstrip(" ,;:")
        if len(trimmed) >= low:
            return trimmed
    return cut


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
    topics: tuple[str, ...] = (),
) -> Any:
    """A value satisfying ``schema``. ``hints`` maps property names to forced values (the
    simulated agent uses it to make ``done`` flags turn true over a loop); ``topics`` are words
    (from the prompt) that prose strings may mention."""
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
            return example_for(
                choice, rng, root=root, name=name, hints=hints, depth=depth, topics=topics
            )
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part, root))
        return example_for(
            merged, rng, root=root, name=name, hints=hints, depth=depth, topics=topics
        )
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        result: dict[str, Any] = {}
        properties: dict[str, Any] = schema.get("properties", {})
        for prop, sub in properties.items():
            result[prop] = example_for(
                sub, rng, root=root, name=prop, hints=hints, depth=depth + 1, topics=topics
            )
        extra = schema.get("additionalProperties")
        if not properties and isinstance(extra, dict) and depth < 4:
            for index in range(rng.randint(1, 3)):
                result[f"{rng.choice(_WORDS)}_{index}"] = example_for(
                    extra, rng, root=root, hints=hints, depth=depth + 1, topics=topics
                )
        return result
    if kind == "array":
        if "prefixItems" in schema:
            return [
                example_for(s, rng, root=root, hints=hints, depth=depth + 1, topics=topics)
                for s in schema["prefixItems"]
            ]
        low = int(schema.get("minItems", 1 if depth < 3 else 0))
        high = int(schema.get("maxItems", max(low, 3 if depth < 3 else low)))
        count = rng.randint(low, max(low, high))
        items = schema.get("items", {"type": "string"})
        values = [
            example_for(
                items, rng, root=root, name=name, hints=hints, depth=depth + 1, topics=topics
            )
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
    return _string_for(schema, rng, name, topics)


def _string_for(
    schema: dict[str, Any], rng: random.Random, name: str, topics: tuple[str, ...] = ()
) -> str:
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
    if name in ("id", "name", "key", "file", "path"):
        text = f"{rng.choice(_WORDS)}_{rng.randint(1, 99)}"
    else:
        text = _sentence(rng, name, topics)
        # A few redraws usually find a sentence that fits a short maxLength whole.
        for _ in range(8):
            if len(text) <= high:
                break
            text = _sentence(rng, name, topics)
    while len(text) < low:
        text += " " + _sentence(rng, name, topics)
    return _fit(text, low, high) if high >= low else text


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
