"""A word diff of two texts (pure, :mod:`difflib`): which words the second text removed, kept
and added, with the whitespace between them kept as it was. Used by the compare view
(prompts, memory blocks, outputs of two runs), the note review screen (a proposal against the
notes it would supersede) and ``tether compare --node``.

Long texts are compared on their first :data:`MAX_WORDS` words (difflib is quadratic at
worst), and :class:`WordDiff` says so.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import NamedTuple

from rich.text import Text

from tui.plain import plural, pretty_json, visible

MAX_WORDS = 20_000
_WORDS = re.compile(r"\s+|[^\s]+\s*")


class WordDiff(NamedTuple):
    """Pieces ``(op, text)`` with op ``=`` (both), ``-`` (only the first), ``+`` (only the
    second); whether a text was longer than :data:`MAX_WORDS` words (compared on the first
    ones); and the counts of words removed and added."""

    pieces: list[tuple[str, str]]
    cut: bool
    removed: int
    added: int

    @property
    def same(self) -> bool:
        """True when nothing was added or removed."""
        return not self.removed and not self.added

    def summary(self) -> str:
        """``3 words removed, 5 added`` / ``the same``."""
        if self.same:
            return "the same" + (" (in their first 20,000 words)" if self.cut else "")
        text = f"{plural(self.removed, 'word')} removed, {self.added:,} added"
        return text + (f" (compared on the first {MAX_WORDS:,} words)" if self.cut else "")


def _tokens(text: str) -> list[str]:
    return _WORDS.findall(text)


def word_diff(first: str | None, second: str | None) -> WordDiff:
    """How ``second`` differs from ``first``, word by word (None reads as empty)."""
    a, b = _tokens(first or ""), _tokens(second or "")
    cut = False
    if len(a) > MAX_WORDS or len(b) > MAX_WORDS:
        a, b, cut = a[:MAX_WORDS], b[:MAX_WORDS], True
    # What both share at the start and the end is kept as is: prompts of two runs mostly
    # differ in a few places, and difflib then compares only the middle.
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    segments: list[list[str]] = []  # [op, removed text, added text]; op "=" or "~"
    if head:
        segments.append(["=", "".join(a[:head]), ""])
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    removed = added = 0
    matcher = difflib.SequenceMatcher(None, middle_a, middle_b)
    for op, i1, i2, j1, j2 in _shifted(matcher.get_opcodes(), head):
        if op == "equal":
            segments.append(["=", "".join(a[i1:i2]), ""])
            continue
        removed += sum(1 for w in a[i1:i2] if w.strip())
        added += sum(1 for w in b[j1:j2] if w.strip())
        segments.append(["~", "".join(a[i1:i2]), "".join(b[j1:j2])])
    if tail:
        segments.append(["=", "".join(a[len(a) - tail :]), ""])
    return WordDiff(_pieces(_absorb_short_matches(segments)), cut, removed, added)


def _shifted(
    opcodes: Sequence[tuple[str, int, int, int, int]], by: int
) -> list[tuple[str, int, int, int, int]]:
    return [(op, i1 + by, i2 + by, j1 + by, j2 + by) for op, i1, i2, j1, j2 in opcodes]


def _absorb_short_matches(segments: list[list[str]]) -> list[list[str]]:
    """Fold a short match (a space, or one short word such as "the") between two changes into
    them, so a rewritten sentence reads as one removal and one addition, not a word-by-word
    interleaving."""
    out: list[list[str]] = []
    for index, segment in enumerate(segments):
        op, text, _ = segment
        between = 0 < index < len(segments) - 1 and segments[index + 1][0] == "~"
        short = op == "=" and len(text.split()) <= 1 and len(text.strip()) <= 4
        if between and short and out and out[-1][0] == "~":
            out[-1][1] += text
            out[-1][2] += text
            continue
        if op == "~" and out and out[-1][0] == "~":
            out[-1][1] += segment[1]
            out[-1][2] += segment[2]
            continue
        out.append(list(segment))
    return out


def _pieces(segments: list[list[str]]) -> list[tuple[str, str]]:
    pieces: list[tuple[str, str]] = []
    for op, first, second in segments:
        if op == "=":
            pieces.append(("=", first))
            continue
        # Words carry the space after them: a space both sides end with is not a change.
        space = ""
        while first and second and first[-1] == second[-1] and first[-1].isspace():
            space, first, second = first[-1] + space, first[:-1], second[:-1]
        if first:
            pieces.append(("-", first))
        if second:
            pieces.append(("+", second))
        if space:
            pieces.append(("=", space))
    return pieces


def diff_text(diff: WordDiff) -> Text:
    """The diff for the dashboard: removed words struck through in red, added words in green,
    shown literally (stored text never becomes markup)."""
    out = Text()
    for op, piece in diff.pieces:
        shown = visible(piece)
        if op == "=":
            out.append(shown)
        elif op == "-":
            out.append(shown, style="strike red")
        else:
            out.append(shown, style="bold green")
    return out


def diff_plain(diff: WordDiff) -> str:
    """The diff as text, ``[-removed-]{+added+}`` as ``git diff --word-diff`` writes it."""
    parts = []
    for op, piece in diff.pieces:
        shown = visible(piece)
        parts.append(shown if op == "=" else f"[-{shown}-]" if op == "-" else f"{{+{shown}+}}")
    return "".join(parts)


def comparable(texts: object, field: str) -> str | None:
    """One side's text of ``field`` (prompt, memory, output of
    :class:`store.read.compare_reads.NodeTexts`) as it is diffed: an output as indented JSON,
    one value a line, so the diff shows which values changed."""
    value = getattr(texts, field)
    if value is None:
        return None
    return pretty_json(value) if field == "output" else str(value)
