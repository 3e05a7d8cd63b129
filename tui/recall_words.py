"""Why a recalled item was picked, in the words a person typed (pure): recall matches stemmed
terms (``summari``, ``caus``), and a block records those; shown, each term becomes the first
word of the query (or of the item's text) that stems to it, so the line reads ``words
summary, cause`` — the memory tab of a node and ``tether node`` both say it so."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from store.search.porter import stem
from store.search.search_policy import fold

_WORD = re.compile(r"[^\W_]+")


def surface_words(texts: Iterable[str | None]) -> dict[str, str]:
    """Each term (as the index stems it) -> the first word of ``texts`` that stems to it."""
    found: dict[str, str] = {}
    for text in texts:
        for word in _WORD.findall(text or ""):
            found.setdefault(stem(fold(word)), word)
    return found


def typed_words(terms: Iterable[str], *texts: str | None) -> list[str]:
    """``terms`` as the words of ``texts`` they came from (a term no text holds stays)."""
    words = surface_words(texts)
    return [words.get(term, term) for term in terms]


def readable_why(item: Mapping[str, Any], query: str | None) -> str:
    """An item's "why" with its matched terms as typed words."""
    why = str(item.get("why") or item.get("reason") or "")
    terms = item.get("matched_terms")
    if not isinstance(terms, list) or not terms:
        return why
    words = ", ".join(typed_words([str(t) for t in terms], query, str(item.get("text") or "")))
    if why.startswith("words "):
        rest = why.split(";", 1)[1] if ";" in why else ""
        return f"words {words}" + (f";{rest}" if rest else "")
    return why or f"matched {words}"
