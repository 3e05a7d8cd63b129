"""The Porter stemmer exactly as SQLite's FTS5 ``porter`` tokenizer applies it.

Python-side term matching and scoring must stem every word the way the full-text index does,
or a query word and an indexed word would disagree (``opening`` -> ``open`` in one place and
``opening`` in the other). Off-the-shelf Porter implementations (PyStemmer, snowballstemmer)
differ from FTS5's on dozens of words in a 44k-word list (``analogy``, ``is``, ``grokking``,
``forcibly``), so this module follows FTS5's rules: words shorter than 3 bytes or longer than
64 bytes are left alone, the rules work on the UTF-8 bytes of a folded word, ``y`` counts as a
vowel after a consonant, and within each step only the first matching suffix is tried.

``tests/store/test_porter.py`` checks this against FTS5 itself on a large word list.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

_MAX_BYTES = 64
_MIN_BYTES = 3
_VOWELS = frozenset(b"aeiou")
_Y = ord("y")


def _is_vowel(char: int, y_is_vowel: bool) -> bool:
    return char in _VOWELS or (y_is_vowel and char == _Y)


def _skip_vc(word: bytes, start: int, end: int, previous_consonant: bool) -> int:
    """Past one vowel run then one consonant: the index just after that consonant, or 0."""
    consonant = previous_consonant
    i = start
    while i < end:
        consonant = not _is_vowel(word[i], consonant)
        if not consonant:
            break
        i += 1
    i += 1
    while i < end:
        consonant = not _is_vowel(word[i], consonant)
        if consonant:
            return i + 1
        i += 1
    return 0


def _m_gt0(word: bytes, end: int) -> bool:
    return _skip_vc(word, 0, end, False) != 0


def _m_gt1(word: bytes, end: int) -> bool:
    first = _skip_vc(word, 0, end, False)
    return bool(first) and _skip_vc(word, first, end, True) != 0


def _m_eq1(word: bytes, end: int) -> bool:
    first = _skip_vc(word, 0, end, False)
    return bool(first) and _skip_vc(word, first, end, True) == 0


def _o_star(word: bytes, end: int) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y."""
    if word[end - 1] in b"wxy":
        return False
    mask = 0
    consonant = False
    for i in range(end):
        consonant = not _is_vowel(word[i], consonant)
        mask = (mask << 1) | consonant
    return (mask & 0b111) == 0b101


def _m_gt1_s_or_t(word: bytes, end: int) -> bool:
    return word[end - 1] in b"st" and _m_gt1(word, end)


def _has_vowel(word: bytes, end: int) -> bool:
    return any(_is_vowel(word[i], i > 0) for i in range(end))


Condition = Callable[[bytes, int], bool] | None
Rule = tuple[bytes, Condition, bytes]


def _rules(condition: Condition, pairs: str) -> tuple[Rule, ...]:
    """``"ational>ate tional>tion"`` -> rules in that order (an empty output drops the suffix)."""
    out = []
    for pair in pairs.split():
        suffix, _, replacement = pair.partition(">")
        out.append((suffix.encode(), condition, replacement.encode()))
    return tuple(out)


_STEP_1B = (
    (b"eed", _m_gt0, b"ee"),
    (b"ed", _has_vowel, b""),
    (b"ing", _has_vowel, b""),
)
_STEP_1B2 = _rules(None, "at>ate bl>ble iz>ize")
_STEP_2 = _rules(
    _m_gt0,
    "ational>ate tional>tion enci>ence anci>ance izer>ize logi>log bli>ble alli>al entli>ent "
    "eli>e ousli>ous ization>ize ation>ate ator>ate alism>al iveness>ive fulness>ful "
    "ousness>ous aliti>al iviti>ive biliti>ble",
)
_STEP_3 = _rules(_m_gt0, "ical>ic ness> icate>ic iciti>ic ful> ative> alize>al")
_STEP_4 = (
    *_rules(_m_gt1, "al ance ence er ic able ible ant ement ment ent"),
    (b"ion", _m_gt1_s_or_t, b""),
    *_rules(_m_gt1, "ou ism ate iti ous ive ize"),
)


def _apply(word: bytes, rules: tuple[Rule, ...]) -> tuple[bytes, int]:
    """Try the first rule whose suffix ends ``word`` (and is shorter than it); return the word
    and the index of the rule applied (-1 when none matched or its condition failed)."""
    for index, (suffix, condition, replacement) in enumerate(rules):
        if len(word) > len(suffix) and word.endswith(suffix):
            stem_end = len(word) - len(suffix)
            if condition is None or condition(word, stem_end):
                return word[:stem_end] + replacement, index
            return word, -1
    return word, -1


def _step_1a(word: bytes) -> bytes:
    if word.endswith(b"s"):
        if word[-2:-1] == b"e":
            n = len(word)
            if (n > 4 and word[-4:-2] == b"ss") or (n > 3 and word[-3:-2] == b"i"):
                return word[:-2]
            return word[:-1]
        if word[-2:-1] != b"s":
            return word[:-1]
    return word


def _stem_bytes(word: bytes) -> bytes:
    word = _step_1a(word)
    word, rule = _apply(word, _STEP_1B)
    if rule > 0:  # "ed" or "ing" was stripped ("eed" -> "ee" is not a strip)
        word, rebuilt = _apply(word, _STEP_1B2)
        if rebuilt < 0:
            last = word[-1]
            if (
                not _is_vowel(last, False)
                and last not in b"lsz"
                and len(word) > 1
                and last == word[-2]
            ):
                word = word[:-1]
            elif _m_eq1(word, len(word)) and _o_star(word, len(word)):
                word += b"e"
    if word.endswith(b"y") and _has_vowel(word, len(word) - 1):
        word = word[:-1] + b"i"
    word, _ = _apply(word, _STEP_2)
    word, _ = _apply(word, _STEP_3)
    word, _ = _apply(word, _STEP_4)
    if word.endswith(b"e") and (
        _m_gt1(word, len(word) - 1)
        or (_m_eq1(word, len(word) - 1) and not _o_star(word, len(word) - 1))
    ):
        word = word[:-1]
    if len(word) > 1 and word.endswith(b"ll") and _m_gt1(word, len(word) - 1):
        word = word[:-1]
    return word


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The stem FTS5's ``porter`` tokenizer stores for an already folded (lower-case, accents
    removed) word."""
    data = word.encode("utf-8")
    if not _MIN_BYTES <= len(data) <= _MAX_BYTES:
        return word
    return _stem_bytes(data).decode("utf-8")
