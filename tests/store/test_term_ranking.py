"""The term index's ranking against brute force: every query shape, with the threshold walk
forced on small banks (so its early stop, ties and delta segment are all exercised), before
and after the delta is merged, and after a round trip through a snapshot file."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from store.search import bank_index, term_ranking
from store.search.bank_arrays import LIVE, STATUS_CODES, Scope
from store.search.bank_index import BankIndex
from store.search.search_policy import idf, index_terms, weak_terms
from store.search.term_ranking import Query, Stats, contribution, score_bank
from store.search.term_snapshot import (
    SnapshotRejected,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)

WORDS = [f"w{i}" for i in range(30)]


def make_rows(count: int, seed: int, first_rowid: int = 1) -> list[dict[str, Any]]:
    """Notes of Zipf-like words (a few in most notes, many rare), short and long, with every
    status, some superseded, kinds and tags; rowids with gaps (other banks' notes)."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    rows = []
    rowid = first_rowid
    for _ in range(count):
        rowid += rng.randint(1, 3)
        body = " ".join(rng.choices(WORDS, weights=weights, k=rng.choice([2, 3, 3, 4, 8, 12])))
        rows.append({
            "rowid": rowid, "namespace": rng.choice(["workflow:a", "workflow:b", "user:c"]),
            "body": body, "status": rng.choice(["accepted"] * 8 + ["pending", "rejected"]),
            "kind": rng.choice([None, None, "lesson"]),
            "tags_json": '["t1"]' if rng.random() < 0.3 else None,
            "superseded": rng.random() < 0.1,
        })
    return rows


def brute_force(bank: BankIndex, mask: np.ndarray, query: Query) -> list[tuple[int, float]]:
    """Score every admitted note the slow way (same float32 arithmetic), sort, cut."""
    docs_terms = []
    for doc in range(bank.size):
        tfs = {}
        for term in query.terms:
            found, term_tfs = bank.postings(term)
            at = np.flatnonzero(found == doc)
            if at.shape[0]:
                tfs[term] = float(term_tfs[at[0]])
        docs_terms.append(tfs)
    admitted = np.flatnonzero(mask)
    notes = admitted.shape[0]
    if not notes:
        return []
    average = float(bank.lengths[mask].sum()) / notes
    df = {t: sum(1 for d in admitted if t in docs_terms[d]) for t in query.terms}
    weak = weak_terms(df, notes) if query.guard else frozenset()
    weights = {t: idf(df[t], notes) for t in query.terms}
    scored = []
    for doc in admitted.tolist():
        held = docs_terms[doc]
        if query.require_all and len(held) < len(query.terms):
            continue
        if not query.require_all and not any(t in held and t not in weak for t in query.terms):
            continue
        total = np.float32(0)
        for term in query.terms:
            if term in held:
                value = contribution(bank.lengths, np.asarray([doc]),
                                     np.asarray([held[term]], dtype=np.float32),
                                     weights[term], average)[0]
                total = np.float32(total + value)
        scored.append((int(bank.rowids[doc]), float(total)))
    scored.sort(key=lambda item: (-item[1], -item[0]))
    return scored[: query.want]


def ranked(bank: BankIndex, mask: np.ndarray, query: Query) -> list[tuple[int, float]]:
    notes = int(mask.sum())
    stats = Stats(notes, float(bank.lengths[mask].sum()), {
        t: int(np.count_nonzero(mask[bank.postings(t)[0]])) for t in query.terms})
    found = score_bank(bank, mask, stats, query)
    found.sort(key=lambda r: (-r.score, -r.rowid))
    return [(r.rowid, r.score) for r in found]


def queries(seed: int, count: int) -> list[Query]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        terms = tuple(dict.fromkeys(
            index_terms(" ".join(rng.choices(WORDS[:8] * 3 + WORDS + ["nowhere"],
                                             k=rng.randint(1, 4))))))
        require_all = rng.random() < 0.5
        out.append(Query(terms, require_all, rng.choice([1, 2, 5, 10, 40]),
                         (not require_all) and rng.random() < 0.5, None))
    return out


@pytest.fixture
def walk_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force the threshold walk (and tiny blocks) even on a few hundred notes, and per-note
    frequency arrays for the terms in a quarter of the notes."""
    monkeypatch.setattr(term_ranking, "EXHAUSTIVE_POSTINGS", 0)
    monkeypatch.setattr(term_ranking, "FIRST_BLOCK", 2)
    monkeypatch.setattr(term_ranking, "LAST_BLOCK", 8)
    monkeypatch.setattr(bank_index, "DENSE_MIN_NOTES", 0)
    monkeypatch.setattr(bank_index, "DENSE_SHARE", 4)


def built(rows: list[dict[str, Any]], namespace: str = "*") -> BankIndex:
    bank = BankIndex(namespace)
    bank.build(rows)
    return bank


SCOPES = [
    (LIVE, ()),
    (Scope((STATUS_CODES["accepted"], STATUS_CODES["pending"]), True), ()),
    (Scope(kind="lesson"), ()),
    (LIVE, (("t1",),)),
]


@pytest.mark.parametrize("forced", [True, False])
def test_every_query_shape_equals_brute_force(forced: bool, request: pytest.FixtureRequest
                                              ) -> None:
    if forced:
        request.getfixturevalue("walk_always")
    rows = make_rows(700, seed=1)
    bank = built(rows[:500])
    bank.append(rows[500:])  # a delta segment, not merged
    assert bank.delta_notes == 200
    for scope, tags in SCOPES:
        mask = bank.mask(scope, tags)
        for query in queries(seed=2, count=80):
            assert ranked(bank, mask, query) == brute_force(bank, mask, query), query
    mask = bank.mask(LIVE, (), ["workflow:a", "user:c"])  # a namespace kind's pooled scope
    for query in queries(seed=3, count=40):
        assert ranked(bank, mask, query) == brute_force(bank, mask, query), query


def test_ties_go_to_the_newest_note_across_runs(walk_always: None) -> None:
    # Hundreds of identical notes: every score ties; the newest must come first.
    rows = [{"rowid": i, "namespace": "workflow:a", "body": "w0 w1" if i % 2 else "w1 w0 w0",
             "status": "accepted", "kind": None, "tags_json": None, "superseded": False}
            for i in range(1, 400)]
    bank = built(rows)
    for query in (Query(("w0", "w1"), True, 10, False, None),
                  Query(("w0", "w1"), False, 10, False, None),
                  Query(("w1",), False, 7, False, None)):
        mask = bank.mask(LIVE)
        assert ranked(bank, mask, query) == brute_force(bank, mask, query)


def test_a_frequency_over_255_is_scored_exactly(walk_always: None) -> None:
    rows = make_rows(300, seed=9)
    rows[7]["body"] = "w0 " * 300 + "w1"
    rows[8]["body"] = "w0 " * 260
    bank = built(rows)
    mask = bank.mask(LIVE)
    for query in (Query(("w0", "w1"), True, 5, False, None),
                  Query(("w0", "w2"), False, 5, False, None)):
        assert ranked(bank, mask, query) == brute_force(bank, mask, query)


def through_snapshot(bank: BankIndex, folder: Path) -> BankIndex:
    meta, arrays = bank.snapshot_parts()
    meta.update(fingerprint=[], change_fingerprint=None)
    path = snapshot_path(folder, bank.namespace)
    write_snapshot(path, meta, arrays)
    return BankIndex.from_snapshot(read_snapshot(path, bank.namespace))


@pytest.mark.parametrize("snapshots", [0, 1, 2])
def test_merging_the_delta_equals_building_from_scratch(snapshots: int, tmp_path: Path) -> None:
    rows = make_rows(900, seed=4)
    grown = built(rows[:300])
    grown.append(rows[300:650])
    grown.merge_delta()
    grown.append(rows[650:800])
    if snapshots:  # a delta saved with the snapshot, then more added after reading it
        grown = through_snapshot(grown, tmp_path)
        assert grown.delta_notes == 150 and not grown.delta
    grown.append(rows[800:850])
    if snapshots == 2:  # the read-back delta and the one added since, saved together
        grown = through_snapshot(grown, tmp_path)
        assert grown.delta_notes == 200 and not grown.delta
    grown.append(rows[850:])
    fresh = built(rows)
    for term in fresh.vocabulary.terms():  # base, read-back delta and new delta together
        assert all(np.array_equal(a, b) for a, b in zip(
            grown.postings(term), fresh.postings(term), strict=True)), term
    grown.merge_delta()
    terms_grown, terms_fresh = grown.vocabulary.terms(), fresh.vocabulary.terms()
    for term in terms_fresh:
        docs_a, tfs_a = grown.postings(term)
        docs_b, tfs_b = fresh.postings(term)
        assert np.array_equal(docs_a, docs_b) and np.array_equal(tfs_a, tfs_b)
        impact_a, edges_a, run_tf_a = grown.runs(term)
        impact_b, edges_b, run_tf_b = fresh.runs(term)
        assert np.array_equal(impact_a, impact_b), term
        assert np.array_equal(edges_a, edges_b) and np.array_equal(run_tf_a, run_tf_b)
    # Words of the tail found in the snapshot's vocabulary keep their numbers (no gaps).
    assert len(grown.vocabulary) == len(fresh.vocabulary)
    assert sorted(terms_grown) == sorted(terms_fresh)
    assert np.array_equal(grown.tag_docs_of("t1"), fresh.tag_docs_of("t1"))


def test_a_snapshot_round_trip_keeps_every_answer(tmp_path: Path, walk_always: None) -> None:
    rows = make_rows(600, seed=5)
    bank = built(rows[:400])
    bank.append(rows[400:])
    bank.rowid_mark, bank.change_mark = int(rows[-1]["rowid"]), 7
    meta, arrays = bank.snapshot_parts()
    meta.update(fingerprint=[[1, "x"]], change_fingerprint=None)
    path = snapshot_path(tmp_path, "*")
    write_snapshot(path, meta, arrays)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    loaded = BankIndex.from_snapshot(read_snapshot(path, "*"))
    assert (loaded.rowid_mark, loaded.change_mark, loaded.size) == (bank.rowid_mark, 7, 600)
    assert (loaded.base_docs, loaded.delta_notes) == (400, 200)  # saved as it was, unmerged
    scratch = built(rows)
    for scope, tags in SCOPES:
        for query in queries(seed=6, count=60):
            assert ranked(loaded, loaded.mask(scope, tags), query) == ranked(
                scratch, scratch.mask(scope, tags), query)
    # The loaded bank keeps growing like any other.
    more = make_rows(50, seed=7, first_rowid=int(rows[-1]["rowid"]))
    loaded.append(more)
    scratch = built(rows + more)
    loaded.set_state(int(rows[3]["rowid"]), "rejected", False)
    scratch.set_state(int(rows[3]["rowid"]), "rejected", False)
    for query in queries(seed=8, count=40):
        assert ranked(loaded, loaded.mask(LIVE), query) == ranked(
            scratch, scratch.mask(LIVE), query)


def tampered(how: str, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Make a bank's snapshot parts whole (every checksum will match) but inconsistent."""
    if how == "delta note in the base":
        arrays["delta_doc"] = arrays["delta_doc"].copy()
        arrays["delta_doc"][0] = 0
    elif how == "delta offsets short":
        arrays["delta_offsets"] = arrays["delta_offsets"][:-1]
    elif how == "delta frequencies as integers":
        arrays["delta_tf"] = arrays["delta_tf"].astype(np.int32)
    elif how == "base past the notes":
        meta["base_docs"] = int(arrays["rowids"].shape[0]) + 1
    elif how == "base terms past the vocabulary":
        arrays["offsets"] = np.append(arrays["offsets"], arrays["offsets"][-1])
        arrays["run_offsets"] = np.append(arrays["run_offsets"], arrays["run_offsets"][-1])
    elif how == "no base count":
        del meta["base_docs"]
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["delta note in the base", "delta offsets short",
                                 "delta frequencies as integers", "base past the notes",
                                 "base terms past the vocabulary", "no base count"])
def test_a_snapshot_whose_arrays_do_not_fit_together_is_rejected(tmp_path: Path, how: str
                                                                 ) -> None:
    rows = make_rows(300, seed=11)
    bank = built(rows[:200])
    bank.append(rows[200:])
    meta, arrays = bank.snapshot_parts()
    meta.update(fingerprint=[], change_fingerprint=None)
    path = snapshot_path(tmp_path, "*")
    write_snapshot(path, meta, arrays)
    assert BankIndex.from_snapshot(read_snapshot(path, "*")).size == 300  # as written: fine
    tampered(how, meta, arrays)
    write_snapshot(path, meta, arrays)
    snapshot = read_snapshot(path, "*")  # the file itself is whole
    with pytest.raises(SnapshotRejected, match="do not fit together"):
        BankIndex.from_snapshot(snapshot)
