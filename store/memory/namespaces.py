"""Memory namespaces: the ``kind:id`` strings that scope facts, threads and notes.

Pure functions only. The rules follow the reference system, so namespaces written by either
read the same:

* kinds are ``workflow``, ``agent``, ``user`` and ``global``;
* formatting escapes the id: ``%`` becomes ``%25`` first, then ``:`` becomes ``%3A`` (the order
  matters: escaping ``:`` first would turn its ``%`` into ``%25`` as well);
* parsing splits at the first ``:``; no colon, or a prefix that is not a kind, means the whole
  string is the id of a ``global`` namespace (``foo:bar`` is ``global`` / ``foo:bar``);
* the stored form is the canonical ``format_namespace(parse_namespace(text))``.

:func:`parse_namespace` never fails (it is what stored strings go through). The command line
uses :func:`validate_namespace`, which also refuses *malformed* input, defined as: an empty
string or an empty id (``workflow:``); leading or trailing whitespace; control characters
(Unicode category Cc, which includes NUL, newlines and escape sequences); text that was not
valid UTF-8 (Python hands such bytes to us as lone surrogates); more than
:data:`MAX_NAMESPACE_CHARS` characters; or a prefix before the first ``:`` that is not one of
the four kinds (``team:x``, ``Workflow:x``: a typo, refused rather than silently stored as the
global namespace ``team%3Ax``; an id with a colon is written ``global:team:x``).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal, NamedTuple

from store.errors import InvalidInputError

NamespaceKind = Literal["workflow", "agent", "user", "global"]
NAMESPACE_KINDS: tuple[NamespaceKind, ...] = ("workflow", "agent", "user", "global")
MAX_NAMESPACE_CHARS = 256

_DECODE = re.compile("%25|%3A")
_DECODED = {"%25": "%", "%3A": ":"}


class Namespace(NamedTuple):
    """A parsed namespace: its kind and its (unescaped) id."""

    kind: NamespaceKind
    id: str

    def __str__(self) -> str:
        return format_namespace(self)


def escape_id(raw: str) -> str:
    """Escape a namespace id for the ``kind:id`` form (``%`` first, then ``:``)."""
    return raw.replace("%", "%25").replace(":", "%3A")


def unescape_id(escaped: str) -> str:
    """Undo :func:`escape_id` in one left-to-right pass (other ``%`` sequences stay literal)."""
    return _DECODE.sub(lambda match: _DECODED[match.group(0)], escaped)


def format_namespace(namespace: Namespace) -> str:
    """The canonical stored form ``kind:escaped-id``."""
    return f"{namespace.kind}:{escape_id(namespace.id)}"


def parse_namespace(text: str) -> Namespace:
    """Parse ``kind:id`` leniently: unknown or missing kinds make a ``global`` namespace."""
    prefix, colon, rest = text.partition(":")
    if colon and prefix in NAMESPACE_KINDS:
        return Namespace(prefix, unescape_id(rest))
    return Namespace("global", text)


def canonical_namespace(namespace: str | Namespace) -> str:
    """The stored form of a namespace given as text or as a :class:`Namespace`.

    Raises:
        InvalidInputError: the text is not valid UTF-8 or holds control characters (such a
            namespace could not be stored, or would be unsafe to show).
    """
    parsed = namespace if isinstance(namespace, Namespace) else parse_namespace(namespace)
    text = format_namespace(parsed)
    ensure_clean_text(text, "the namespace")
    return text


def ensure_clean_text(text: str, what: str, *, allow: str = "") -> None:
    """Refuse text that was not valid UTF-8 or holds control characters (except ``allow``).

    ``what`` names the argument in the one-sentence error (``"the fact key"``).
    """
    ensure_utf8(text, what)
    for char in text:
        if char not in allow and unicodedata.category(char) == "Cc":
            raise InvalidInputError(
                f"{_capital(what)} contains the control character U+{ord(char):04X}."
            )


def ensure_utf8(text: str, what: str) -> None:
    """Refuse text holding lone surrogates (how Python passes on bytes that were not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"{_capital(what)} is not valid UTF-8 (bad byte at character {error.start + 1})."
        ) from None


def ensure_length(text: str, what: str, limit: int) -> None:
    """Refuse text longer than ``limit`` characters, naming ``what`` in the sentence."""
    if len(text) > limit:
        raise InvalidInputError(
            f"{_capital(what)} is {len(text)} characters long; the limit is {limit}."
        )


def validate_namespace(text: str) -> Namespace:
    """Parse a namespace typed by a person, refusing malformed input (see the module docstring).

    Raises:
        InvalidInputError: the text is malformed; the message says why in one sentence.
    """
    ensure_utf8(text, "the namespace")
    if not text:
        raise InvalidInputError("The namespace is empty; use kind:id, e.g. workflow:code-review.")
    ensure_length(text, "the namespace", MAX_NAMESPACE_CHARS)
    ensure_clean_text(text, "the namespace")
    if text != text.strip():
        raise InvalidInputError("The namespace starts or ends with whitespace.")
    prefix, colon, _rest = text.partition(":")
    if colon and prefix not in NAMESPACE_KINDS:
        raise InvalidInputError(unknown_kind_message(text, prefix))
    namespace = parse_namespace(text)
    if not namespace.id:
        raise InvalidInputError(
            f"The namespace {text!r} has an empty id; use kind:id, e.g. workflow:code-review."
        )
    return namespace


def unknown_kind_message(text: str, prefix: str) -> str:
    """The sentence refusing ``text`` whose ``prefix`` is not a namespace kind."""
    kinds = ", ".join(NAMESPACE_KINDS[:-1]) + " or " + NAMESPACE_KINDS[-1]
    hint = ""
    if prefix.lower() in NAMESPACE_KINDS:
        hint = f" (kinds are lower-case: {prefix.lower()}:…)"
    return (
        f"The namespace {text!r} has the unknown kind {prefix!r}{hint}; the kind is one of "
        f"{kinds}, e.g. workflow:code-review (an id containing ':' is written global:{text})."
    )


def bank_to_namespace(bank: str) -> Namespace:
    """Map a memory bank name to its namespace.

    ``workflow-x``, ``agent-x``, ``user-x`` and ``global-x`` (non-empty ``x``) name that kind
    with id ``x``; any other bank is a workflow namespace named after the bank
    (``project-7`` -> ``workflow:project-7``).
    """
    for kind in NAMESPACE_KINDS:
        prefix = f"{kind}-"
        if bank.startswith(prefix) and len(bank) > len(prefix):
            return Namespace(kind, bank[len(prefix) :])
    return Namespace("workflow", bank)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
