"""The passage of a long note a memory block shows: the sentences around the words it matched,
with a marker where text was left out, instead of the note's first bytes (pure).

A note longer than :data:`PASSAGE_BYTES` UTF-8 bytes is cut to the sentence holding the most
of its matched query terms, widened by its neighbours (the next one first) while the passage
stays within the bound; a note matched by meaning alone keeps its beginning. Each gap is
marked with :data:`GAP`. The bound was chosen on the tuning splits
(docs/benchmarks/recall-quality.md): it is above the length of nine in ten chat turns, so
conversation notes are shown whole, and lets a 2048-byte block hold six long notes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from store.search.search_policy import index_terms

PASSAGE_BYTES = 320
GAP = "…"
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut(text: str, max_bytes: int) -> str:
    """``text`` cut at a word boundary within ``max_bytes`` bytes (counting the gap marker)."""
    room = max_bytes - _bytes(GAP)
    out = text.encode("utf-8")[: max(room, 0)].decode("utf-8", "ignore")
    space = out.rfind(" ")
    if space > len(out) // 2:
        out = out[:space]
    return out.rstrip() + GAP


def passage(text: str, terms: Sequence[str], max_bytes: int = PASSAGE_BYTES) -> tuple[str, bool]:
    """The part of ``text`` to show (whitespace collapsed) and whether anything was left out
    (see the module docstring)."""
    flat = " ".join(text.split())
    if _bytes(flat) <= max_bytes:
        return flat, False
    sentences = [s for s in _SENTENCE_END.split(flat) if s]
    wanted = set(terms)
    if not wanted or len(sentences) == 1:
        return _cut(flat, max_bytes), True
    hits = [len(wanted & set(index_terms(s))) for s in sentences]
    best = max(range(len(sentences)), key=lambda i: (hits[i], -i))
    if hits[best] == 0:
        return _cut(flat, max_bytes), True
    first = last = best
    if _bytes(sentences[best]) + 2 * _bytes(GAP) > max_bytes:
        shown = _cut(sentences[best], max_bytes - (_bytes(GAP) if best else 0))
        return (GAP + shown if best else shown), True

    def size(a: int, b: int) -> int:
        gaps = (a > 0) + (b < len(sentences) - 1)
        return _bytes(" ".join(sentences[a:b + 1])) + gaps * _bytes(GAP)

    while True:
        grown = False
        for a, b in ((first, last + 1), (first - 1, last)):
            if a >= 0 and b < len(sentences) and size(a, b) <= max_bytes:
                first, last, grown = a, b, True
                break
        if not grown:
            break
    shown = " ".join(sentences[first:last + 1])
    return (GAP if first > 0 else "") + shown + (GAP if last < len(sentences) - 1 else ""), True
