"""Recall quality on Tether's own labelled dev set: keyword (no stemming), stemmed keyword,
semantic and hybrid recall, with hit@k, recall@k and latency, in one run.

    python bench/recall_dev/generate.py      # only to rebuild the committed dev set
    python bench/bench_recall_quality.py     # needs the semantic extra and the model weights

The dev set (``bench/recall_dev/``: 5,298 notes in five banks, 338 questions labelled with
their evidence notes) is imported into a fresh workspace through ``MemoryStore.save_notes``,
every note is embedded, and each question is asked exactly as a task with
``MemoryConfig(bank=..., recall=question)`` would ask it: a ``RecallRequest`` over the
question's banks, limit 10.

* ``keyword (no stemming)``: the same exact per-bank BM25, weak-match guard and echo demotion
  as Tether's keyword recall, over unstemmed words (the policy before stemming), computed here;
* ``stemmed keyword``: Tether's keyword recall (``KeywordRecallBackend``);
* ``semantic``: cosine similarity only (``SemanticRecallBackend``);
* ``hybrid (default: score fusion)``: the default when the extra is installed
  (``HybridRecallBackend``: min-max normalised scores, keyword weight 0.5, semantic 1.0);
* ``hybrid (RRF)``: reciprocal-rank fusion (k 60, equal weights), for the comparison;
  ``--sweep`` compares more fusion settings.

hit@k: the share of questions with at least one evidence note in the top k; recall@k: the
share of evidence notes found in the top k, averaged over questions. Latency is per recall
(p50/p95 ms) with the model already loaded. Writes bench/results/bench_recall_quality.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_memory_writes import machine

from engine.memory.encoder import load_encoder
from engine.memory.keyword_recall import KeywordRecallBackend, RecallBackend
from engine.memory.recall_items import RecallRequest
from engine.memory.semantic_recall import Embedder, HybridRecallBackend, SemanticRecallBackend
from store.db.backends import open_database
from store.db.sqlite.sqlite_schema import SCHEMA_VERSION
from store.memory.memory_store import MemoryStore
from store.memory.note_values import NoteInput
from store.search.search_policy import (
    _WORD,
    ECHO_PENALTY,
    bm25,
    fold,
    idf,
    is_content_word,
    is_question_echo,
    weak_terms,
)
from store.workspace.layout import Workspace

DEV = Path(__file__).resolve().parent / "recall_dev"
RESULTS = Path(__file__).resolve().parent / "results" / "bench_recall_quality.json"
CACHE = Path("/tmp/tether-bench-recall-quality")
LIMIT = 10


def load_dev() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    notes = [json.loads(line) for line in (DEV / "corpus.jsonl").read_text().splitlines()]
    questions = [json.loads(line) for line in (DEV / "questions.jsonl").read_text().splitlines()]
    return notes, questions


def words(text: str) -> list[str]:
    return _WORD.findall(fold(text))


class UnstemmedKeyword:
    """Exact per-bank BM25 over unstemmed words, with Tether's guard and echo demotion."""

    name = "keyword (no stemming)"

    def __init__(self, live: dict[str, list[tuple[str, str]]]) -> None:
        self.banks: dict[str, tuple[list[tuple[str, list[str], str]], float]] = {}
        for bank, notes in live.items():
            docs = [(note_id, words(body), body) for note_id, body in notes]
            average = sum(len(d) for _, d, _ in docs) / max(1, len(docs))
            self.banks[bank] = (docs, average)

    async def recall(self, request: RecallRequest) -> list[str]:
        terms = list(dict.fromkeys(w for w in words(request.query) if is_content_word(w)))
        scored: list[tuple[float, str]] = []
        for bank in request.namespaces:
            docs, average = self.banks.get(bank, ([], 1.0))
            df = {t: sum(1 for _, d, _ in docs if t in d) for t in terms}
            weak = weak_terms(df, len(docs))
            weights = {t: idf(df[t], len(docs)) for t in terms}
            for note_id, doc, body in docs:
                matched = [t for t in terms if t in doc]
                if not any(t not in weak for t in matched):
                    continue
                score = bm25(doc, weights, average)
                if is_question_echo(terms, matched, body):
                    score *= ECHO_PENALTY
                scored.append((score, note_id))
        scored.sort(key=lambda s: -s[0])
        return [f"note:{note_id}" for _, note_id in scored[: request.limit]]


async def ask(backend: Any, request: RecallRequest) -> list[str]:
    if isinstance(backend, UnstemmedKeyword):
        return await backend.recall(request)
    result = await backend.recall(request)
    assert not result.degraded, result.reason
    return [item.id for item in result.items]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


async def evaluate(backends: dict[str, Any], questions: list[dict[str, Any]],
                   rounds: int) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    found: dict[str, list[list[str]]] = {name: [] for name in backends}
    times: dict[str, list[float]] = {name: [] for name in backends}
    for round_number in range(rounds):
        for question in questions:
            request = RecallRequest(tuple(question["banks"]), question["question"], (), LIMIT)
            for name, backend in backends.items():  # interleaved: same question, each backend
                started = time.perf_counter()
                ids = await ask(backend, request)
                times[name].append((time.perf_counter() - started) * 1000)
                if round_number == 0:
                    found[name].append(ids)
    for name in backends:
        rows: dict[str, list[float]] = {"hit@5": [], "hit@10": [], "recall@5": [],
                                        "recall@10": []}
        by_type: dict[str, list[float]] = {}
        for question, ids in zip(questions, found[name], strict=True):
            evidence = {f"note:{e}" for e in question["evidence"]}
            for k in (5, 10):
                got = evidence & set(ids[:k])
                rows[f"hit@{k}"].append(1.0 if got else 0.0)
                rows[f"recall@{k}"].append(len(got) / len(evidence))
            by_type.setdefault(question["type"], []).append(
                1.0 if evidence & set(ids[:10]) else 0.0)
        metrics[name] = {
            **{key: round(statistics.mean(values), 3) for key, values in rows.items()},
            "p50 ms": round(statistics.median(times[name]), 2),
            "p95 ms": round(percentile(times[name], 0.95), 2),
            "hit@10 by type": {t: round(statistics.mean(v), 3) for t, v in sorted(by_type.items())},
        }
    return metrics


async def workspace_for(notes: list[dict[str, Any]], encoder: Any) -> tuple[Path, float, float]:
    """The dev set imported and embedded, cached under /tmp by corpus, schema and model (the
    embedding pass takes minutes on a busy 2-core machine)."""
    key = hashlib.sha256(
        (DEV / "corpus.jsonl").read_bytes() + f"{SCHEMA_VERSION}/{encoder.model_id}".encode()
    ).hexdigest()[:16]
    folder = CACHE / key
    timings = folder / "timings.json"
    if timings.exists():
        saved = json.loads(timings.read_text())
        return folder, saved["import_s"], saved["embed_s"]
    partial = folder.with_name(key + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    db = await open_database(Workspace(partial))
    memory = MemoryStore(db)
    started = time.perf_counter()
    await memory.save_notes([
        NoteInput(n["namespace"], n["body"], id=n["id"], author=n["author"],
                  status=n["status"], supersedes=tuple(n["supersedes"]),
                  created_at_ms=n["created_at_ms"])
        for n in notes
    ])
    imported = time.perf_counter() - started
    started = time.perf_counter()
    await Embedder(db, encoder).catch_up()
    embed_s = time.perf_counter() - started
    await db.close()
    (partial / "timings.json").write_text(json.dumps({"import_s": imported, "embed_s": embed_s}))
    partial.rename(folder)
    return folder, imported, embed_s


async def main(rounds: int, sweep: bool) -> None:
    encoder = load_encoder()
    if encoder is None:
        raise SystemExit(
            "the semantic extra and model weights are needed (see docs/memory-in-workflows.md)"
        )
    notes, questions = load_dev()
    load_before = os.getloadavg()
    folder, imported, embed_s = await workspace_for(notes, encoder)
    print(f"{len(notes)} notes imported in {imported:.2f}s and embedded in {embed_s:.1f}s "
          f"({len(notes) / embed_s:.0f} notes/s)", flush=True)
    db = await open_database(Workspace(folder), create=False)
    memory = MemoryStore(db)
    live: dict[str, list[tuple[str, str]]] = {}
    for note in await memory.list_notes(limit=None):
        live.setdefault(note.namespace, []).append((note.id, note.body))
    backends: dict[str, RecallBackend | UnstemmedKeyword] = {
        UnstemmedKeyword.name: UnstemmedKeyword(live),
        "stemmed keyword": KeywordRecallBackend(db),
        "semantic": SemanticRecallBackend(db, encoder),
        "hybrid (default: score fusion)": HybridRecallBackend(db, encoder),
        "hybrid (RRF)": HybridRecallBackend(db, encoder, fusion="rrf", weights=(1.0, 1.0)),
    }
    if sweep:  # fusion and weights compared on the dev set (docs/design-notes.md)
        backends = {
            f"rrf k={k} keyword {kw}": HybridRecallBackend(
                db, encoder, fusion="rrf", weights=(kw, 1.0), rrf_k=k)
            for k in (10, 60) for kw in (0.5, 1.0)
        }
        backends.update({
            f"normalised keyword {kw}": HybridRecallBackend(
                db, encoder, fusion="normalised", weights=(kw, 1.0))
            for kw in (0.25, 0.5, 1.0)
        })
        backends["semantic"] = SemanticRecallBackend(db, encoder)
    for backend in backends.values():  # warm: indexes built, model loaded
        await ask(backend, RecallRequest(("agent:triage",), "warm up", (), LIMIT))
    metrics = await evaluate(backends, questions, rounds)
    await db.close()
    print(f"{'recall':30} {'hit@5':>6} {'hit@10':>6} {'rec@5':>6} {'rec@10':>6} "
          f"{'p50 ms':>7} {'p95 ms':>7}")
    for name, m in metrics.items():
        print(f"{name:30} {m['hit@5']:>6.3f} {m['hit@10']:>6.3f} {m['recall@5']:>6.3f} "
              f"{m['recall@10']:>6.3f} {m['p50 ms']:>7.2f} {m['p95 ms']:>7.2f}")
    for name, m in metrics.items():
        print(f"  {name}: hit@10 by type {m['hit@10 by type']}")
    if sweep:
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "notes": len(notes), "questions": len(questions), "limit": LIMIT,
        "import_s": round(imported, 2), "embed_s": round(embed_s, 1),
        "results": metrics,
    }, indent=2) + "\n")
    print(f"wrote {RESULTS}; load average {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds per question")
    parser.add_argument("--sweep", action="store_true",
                        help="compare fusion methods and keyword weights instead")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.sweep))
