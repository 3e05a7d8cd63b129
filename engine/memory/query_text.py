"""What of a query the encoder sees, and the cache of query vectors (pure, apart from the cache).

A task prompt used as the query can be hundreds of words; the encoder's cost grows with the
square of its length, and a sentence embedding of 200 words is mostly boilerplate. So a long
query is cut to its most informative sentences (:func:`focus_query`): those with the most
distinct content words, a question, or identifier-like words (digits, ``-``, ``_``, ``.``
inside), up to :data:`QUERY_WORDS` words, kept in their original order. Keyword recall still
reads the whole prompt.

:class:`QueryVectors` keeps the vectors of recent queries (a retried node, a loop's repeated
prompt, the same question from many tasks), per model.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from store.search.search_policy import fold, is_content_word

if TYPE_CHECKING:
    import numpy as np

# About 64 word pieces: encoding 64 costs a quarter of 128 (bench/bench_recall.py) and every
# question of the dev sets is shorter (their quality cannot change).
QUERY_WORDS = 48
QUERY_CACHE_SIZE = 512

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W_]+")
_IDENTIFIER = re.compile(r"\w[-_./]\w|\d")


def _score(sentence: str) -> float:
    words = {w for w in _WORD.findall(fold(sentence)) if is_content_word(w)}
    identifiers = sum(1 for token in sentence.split() if _IDENTIFIER.search(token))
    return len(words) + identifiers + (2.0 if "?" in sentence else 0.0)


def focus_query(text: str, max_words: int = QUERY_WORDS) -> str:
    """``text`` with runs of whitespace collapsed, cut to its most informative sentences
    within ``max_words`` words when longer (see the module docstring)."""
    words = text.split()
    if len(words) <= max_words:
        return " ".join(words)
    sentences = [" ".join(s.split()) for s in _SENTENCE.split(text) if s.strip()]
    ranked = sorted(range(len(sentences)), key=lambda i: (-_score(sentences[i]), i))
    chosen: list[int] = []
    room = max_words
    for index in ranked:
        size = len(sentences[index].split())
        if size <= room:
            chosen.append(index)
            room -= size
        elif not chosen:  # one sentence longer than the cap: its first words
            sentences[index] = " ".join(sentences[index].split()[:max_words])
            chosen.append(index)
            break
    return " ".join(sentences[i] for i in sorted(chosen))


class QueryVectors:
    """A bounded, thread-safe cache of query vectors keyed by the focused query text."""

    def __init__(self, size: int = QUERY_CACHE_SIZE) -> None:
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def peek(self, text: str) -> np.ndarray | None:
        """The cached vector of ``text`` (None when it is not cached); computes nothing."""
        with self._lock:
            found = self._vectors.get(text)
            if found is not None:
                self._vectors.move_to_end(text)
                self.hits += 1
            return found

    def get(self, text: str, compute: Callable[[str], np.ndarray]) -> np.ndarray:
        """The cached vector of ``text``, else ``compute(text)`` (remembered)."""
        with self._lock:
            found = self._vectors.get(text)
            if found is not None:
                self._vectors.move_to_end(text)
                self.hits += 1
                return found
            self.misses += 1
        vector = compute(text)
        vector.setflags(write=False)
        with self._lock:
            self._vectors[text] = vector
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector
