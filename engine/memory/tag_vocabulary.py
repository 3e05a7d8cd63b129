"""The stable tag vocabulary of memory: which tags a note, a memory config or a tool call may
carry (pure)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from store.errors import InvalidInputError

MAX_TAGS = 16
MAX_TAG_CHARS = 128
SOURCE_VALUES = ("chat", "run", "reflection", "import")
SCOPE_VALUES = ("main", "branch")


def config_error(message: str) -> InvalidInputError:
    """A memory setting refused, as one sentence."""
    return InvalidInputError(f"Memory config: {message}")


def has_bad_chars(text: str) -> bool:
    """True when ``text`` holds whitespace or a control character."""
    return any(unicodedata.category(ch) == "Cc" or ch.isspace() for ch in text)


def validate_tag(tag: object) -> str:
    """Return ``tag`` if it belongs to the stable vocabulary, else raise one clear sentence.

    Stable tags: ``branch:<v>`` / ``stream:<v>`` (non-empty ``v`` without whitespace or control
    characters), ``source:chat|run|reflection|import``, ``scope:main|branch``; at most 128
    characters. Run, node or session ids never become tags: they would fragment the store and
    belong in provenance instead.
    """
    if not isinstance(tag, str):
        raise config_error(f"tag {tag!r} is not text.")
    if len(tag) > MAX_TAG_CHARS:
        raise config_error(f"tag {tag[:40]!r}... is longer than {MAX_TAG_CHARS} characters.")
    kind, colon, value = tag.partition(":")
    ok = False
    if colon and kind in ("branch", "stream"):
        ok = bool(value) and not has_bad_chars(value)
    elif colon and kind == "source":
        ok = value in SOURCE_VALUES
    elif colon and kind == "scope":
        ok = value in SCOPE_VALUES
    if not ok:
        raise config_error(
            f"tag {tag!r} is not a stable tag (use branch:<name>, stream:<name>, "
            f"source:{'|'.join(SOURCE_VALUES)} or scope:{'|'.join(SCOPE_VALUES)})."
        )
    return tag


def validate_tags(tags: Iterable[object] | None) -> tuple[str, ...]:
    """Validate and de-duplicate tags (order kept); more than 16 distinct tags is an error."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        raise config_error("tags must be a list of tags, not a single string.")
    unique = list(dict.fromkeys(validate_tag(tag) for tag in tags))
    if len(unique) > MAX_TAGS:
        raise config_error(f"{len(unique)} distinct tags given; at most {MAX_TAGS} are allowed.")
    return tuple(unique)
