"""Reading argument values that may come from stdin (``-``) or a file (``@PATH``), bounded.

Nothing is read past the limit: ``@/dev/zero``, an endless pipe on stdin or a huge file stop at
``limit + 1`` bytes with one sentence, instead of filling memory. Text must be UTF-8.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import BinaryIO

from store.db.paging import LARGEST_INTEGER
from store.errors import InvalidInputError
from store.memory.facts import MAX_VALUE_BYTES
from store.memory.namespaces import ensure_utf8

_CHUNK = 64 * 1024


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def read_bounded(stream: BinaryIO, limit: int, what: str) -> bytes:
    """Read ``stream`` to its end, refusing (without reading further) past ``limit`` bytes."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise InvalidInputError(
                f"{what[:1].upper()}{what[1:]} is larger than {_mib(limit)}, the most Tether "
                "reads; nothing was changed."
            )


def decode_utf8(data: bytes, what: str) -> str:
    """``data`` as text; bad UTF-8 is one sentence naming the offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInputError(
            f"{what[:1].upper()}{what[1:]} is not valid UTF-8 (bad byte at offset {error.start})."
        ) from None


def read_text_argument(value: str, what: str, *, limit: int = MAX_VALUE_BYTES) -> str:
    """An argument's text: ``-`` reads stdin, ``@path`` reads a file, anything else is itself.

    Large values cannot go through the command line (the OS caps one argument at 128 KiB),
    hence stdin and files. Input must be UTF-8 and at most ``limit`` bytes.
    """
    if value == "-":
        return decode_utf8(read_bounded(sys.stdin.buffer, limit, what), what)
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            with path.open("rb") as handle:
                data = read_bounded(handle, limit, what)
        except OSError as error:
            raise InvalidInputError(
                f"Cannot read {what} from {path}: {error.strerror or error}."
            ) from None
        return decode_utf8(data, what)
    ensure_utf8(value, what)
    if len(value.encode("utf-8")) > limit:
        raise InvalidInputError(
            f"{what[:1].upper()}{what[1:]} is larger than {_mib(limit)}, the most Tether reads."
        )
    return value


_ITERATION_SUFFIX = re.compile(r"^(?P<node>.+)#(?P<iteration>\d+)$")


def split_iteration(node_id: str, iteration: int | None) -> tuple[str, int | None]:
    """``draft#2`` (as ``tether run`` prints a loop node) is node ``draft`` at iteration 2;
    InvalidInputError when ``--iteration`` says otherwise."""
    match = _ITERATION_SUFFIX.match(node_id)
    suffix = int(match.group("iteration")) if match is not None else 0
    if match is None or suffix > LARGEST_INTEGER:  # no iteration can be that: a node id's text
        return node_id, iteration
    if iteration is not None and iteration != suffix:
        raise InvalidInputError(
            f"{node_id!r} names iteration {suffix} but --iteration says {iteration}; "
            "give one of them."
        )
    return match.group("node"), suffix
