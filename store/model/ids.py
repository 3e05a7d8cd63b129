"""Run and node ids: what is accepted at every entry, and the folder name each one gets.

Ids become paths under ``artifacts/``, so they are checked wherever they come in (the command
line, the dashboard, the store API) and never used as path components unchecked:

- a **run id** is 1-64 characters of letters, digits, ``_``, ``-`` and ``.``, starting with a
  letter or digit (generated ones look like ``r-0123456789ab``); ``..`` or ``a/b`` can never
  name a run, so deleting a run can never reach outside its folder;
- a **node id** is any text of 1 to :data:`MAX_NODE_ID_CHARS` characters without NUL or lone
  surrogates (fan-out keys come from data). :func:`node_folder_name` maps it to a distinct,
  bounded, readable folder name.
"""

from __future__ import annotations

import os
import re

from store.errors import InvalidInputError

MAX_RUN_ID_CHARS = 64
MAX_NODE_ID_CHARS = 16_384
FOLDER_NAME_CHARS = 80
"""Node ids up to this long made only of safe characters are their own folder name."""
_READABLE_CHARS = 56
_HASH_CHARS = 16

_RUN_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{MAX_RUN_ID_CHARS - 1}}}")
_SAFE_NAME = re.compile(rf"[A-Za-z0-9_\-\[\]][A-Za-z0-9_.\-\[\]]{{0,{FOLDER_NAME_CHARS - 1}}}")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_.\-\[\]]")
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def random_hex(chars: int) -> str:
    """``chars`` random hexadecimal digits from the operating system's generator: the random
    part of generated ids (``uuid`` and ``secrets`` would add milliseconds to every short
    command's start-up for the same bytes)."""
    return os.urandom((chars + 1) // 2).hex()[:chars]


def _shown(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "…")


def is_run_id(value: object) -> bool:
    """True when ``value`` can be a run id."""
    return isinstance(value, str) and _RUN_ID.fullmatch(value) is not None


def validate_run_id(value: object) -> str:
    """Return ``value`` when it can be a run id, else raise InvalidInputError (one sentence)."""
    if not is_run_id(value):
        shown = _shown(value) if isinstance(value, str) else type(value).__name__
        raise InvalidInputError(
            f"{shown} is not a run id; run ids are 1-{MAX_RUN_ID_CHARS} letters, digits, '_', "
            "'-' or '.', starting with a letter or digit (like r-0123456789ab)."
        )
    assert isinstance(value, str)
    return value


def validate_node_id(value: object) -> str:
    """Return ``value`` when it can be a node id, else raise InvalidInputError (one sentence)."""
    if not isinstance(value, str) or not value:
        raise InvalidInputError("A node id must be non-empty text.")
    if len(value) > MAX_NODE_ID_CHARS:
        raise InvalidInputError(
            f"A node id is {len(value):,} characters long; at most {MAX_NODE_ID_CHARS:,} are "
            "accepted."
        )
    if _BAD_TEXT.search(value):
        raise InvalidInputError(
            f"The node id {_shown(value)} holds a NUL character or a lone surrogate."
        )
    return value


def node_folder_name(node_id: str) -> str:
    """The artifact folder name of a node: the id itself when it is short and made of safe
    characters, else a readable prefix, ``~`` and a hash of the whole id.

    Distinct ids always get distinct names: a name holding ``~`` is never an id used as is, and
    hashed names differ by a 64-bit digest of the full id. Every name has at most
    :data:`FOLDER_NAME_CHARS` characters, never starts with ``.`` and never holds ``/``.
    """
    validate_node_id(node_id)
    if _SAFE_NAME.fullmatch(node_id):
        return node_id
    readable = _UNSAFE_CHAR.sub("_", node_id)[:_READABLE_CHARS].lstrip(".") or "node"
    import hashlib  # only for long or unusual node ids

    digest = hashlib.sha256(node_id.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    return f"{readable}~{digest}"
