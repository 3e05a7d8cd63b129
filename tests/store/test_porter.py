"""store.search.porter stems exactly like SQLite's FTS5 porter tokenizer: checked against FTS5
itself
on a large word list (every word of the Python standard library's sources plus generated words
around every suffix rule), since the Python side and the index must never disagree."""

from __future__ import annotations

import itertools
import random
import re
import sqlite3
import sysconfig
from pathlib import Path

from store.search.porter import stem
from store.search.search_policy import fold, index_terms

SUFFIXES = [
    "s", "ss", "ies", "sses", "eed", "ed", "ing", "at", "bl", "iz", "y", "ational", "tional",
    "enci", "anci", "izer", "logi", "bli", "alli", "entli", "eli", "ousli", "ization", "ation",
    "ator", "alism", "iveness", "fulness", "ousness", "aliti", "iviti", "biliti", "icate",
    "ative", "alize", "iciti", "ical", "ful", "ness", "al", "ance", "ence", "er", "ic", "able",
    "ible", "ant", "ement", "ment", "ent", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
    "e", "ll",
]


def word_list() -> list[str]:
    words: set[str] = set()
    for path in itertools.islice(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"), 1500):
        words.update(w.lower() for w in re.findall(r"[A-Za-z]+", path.read_text(errors="ignore")))
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(20_000):
        stem_part = "".join(rng.choice(letters) for _ in range(rng.randint(1, 6)))
        words.add(stem_part + rng.choice(SUFFIXES))
    words.update(["café", "naïve", "übermäßig", "résumés", "a", "is", "as", "x" * 70 + "ing"])
    return sorted(words)


def fts5_terms(words: list[str]) -> dict[int, str]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", enumerate(words, 1))
    return {int(doc): str(term) for doc, term in conn.execute("SELECT doc, term FROM v")}


def test_stems_agree_with_fts5_on_a_large_word_list() -> None:
    words = word_list()
    assert len(words) > 30_000
    indexed = fts5_terms(words)
    wrong = [(w, indexed[i], stem(fold(w))) for i, w in enumerate(words, 1)
             if indexed[i] != stem(fold(w))]
    assert wrong == []


def test_known_word_forms_meet() -> None:
    assert {stem(w) for w in ("research", "researching", "researched")} == {"research"}
    assert stem("dropped") == stem("drop") and stem("opening") == stem("open")
    assert index_terms("Ponies caresses") == ["poni", "caress"]
