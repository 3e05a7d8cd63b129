"""Recall quality on real, labelled text, asked exactly as a task asks, beside public baselines
computed in the same run from the same notes.

    pip install -e '.[bench,semantic]'
    python bench/bench_recall_quality.py                      # chat and docs sets
    python bench/bench_recall_quality.py --locomo PATH        # and LoCoMo, when you have it
    python bench/bench_recall_quality.py --sweep              # the tuning splits' ablations

Sets (``bench/recall_sets/``, README.md there): human-human chat from ``chitchat-dataset``
(one bank per participant, split by participant) and FAQ documentation from Debian's
``perl-doc`` (tuning) and ``python3.11-doc`` (held out); LoCoMo (``--locomo`` or
``TETHER_LOCOMO``: a folder of its per-conversation files, its ``locomo10.zip`` or
``locomo10.json``; skipped with a sentence when absent), split by conversation. Notes are
imported as ``tether notes import`` writes them (no tags added), into user banks (chat,
LoCoMo) and project banks (docs), and embedded.

Every question is asked through ``MemoryRuntime.block_for`` with ``MemoryConfig(bank=...,
recall=question, mode=...)`` for Tether's keyword, semantic and hybrid modes (bank-type tag
rules included); the ranking is the recalled items the block records (16), the block what
the task would see. Baselines: ``bm25s`` + PyStemmer, ``dense`` (the same vectors, exact) and
``RRF`` of both (``bench/recall_baselines.py``). Reported per set and split: hit@5/10,
recall@5/10, evidence in the block (share of the evidence recall found that the 2048-byte
block kept), p50/p95 ms per mode (query embedding not cached), and hybrid's paired difference
in hit@10 against each other system with a 95% bootstrap interval.

``--sweep`` asks the tuning splits only, with one constant changed at a time (the question-
echo rule, the fusion, the similarity floor), to justify Tether's defaults. Embedded
workspaces are cached under /tmp; results go to ``bench/results/bench_recall_quality.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_memory_writes import machine
from recall_baselines import Bm25sBank, DenseBank, paired_bootstrap, rrf
from recall_sets_load import RecallSet, committed_set, locomo_set

from engine.memory import semantic_recall
from engine.memory.encoders import AUTO, PreparedEncoder, load_encoder
from engine.memory.memory_config import MemoryConfig
from engine.memory.recall_mode import MemorySettings
from engine.memory.runtime import MemoryRuntime
from engine.memory.semantic_recall import Embedder, HybridRecallBackend
from store.db.backends import open_database
from store.db.seam import Database
from store.db.sqlite.sqlite_schema import SCHEMA_VERSION
from store.memory.memory_store import MemoryStore
from store.memory.note_values import NoteInput
from store.runs.run_store import RunStore
from store.search import search_policy, term_ranking
from store.workspace.layout import Workspace

RESULTS = Path(__file__).resolve().parent / "results" / "bench_recall_quality.json"
CACHE = Path("/tmp/tether-bench-recall-quality")
MODES = ("keyword", "semantic", "hybrid")
DEPTH = 16


async def workspace_for(found: RecallSet, encoder: PreparedEncoder) -> Path:
    """The set imported (as ``notes import`` writes) and embedded, cached under /tmp."""
    digest = hashlib.sha256(json.dumps(found.notes, sort_keys=True).encode()
                            + f"{SCHEMA_VERSION}".encode()).hexdigest()[:16]
    folder = CACHE / f"{found.name}-{digest}"
    if not (folder / "imported").exists():
        shutil.rmtree(folder, ignore_errors=True)
        db = await open_database(Workspace(folder))
        await MemoryStore(db).save_notes([
            NoteInput(n["namespace"], n["body"], id=n["id"], kind=n.get("kind"),
                      tags=tuple(n.get("tags", ())), author=n.get("author"),
                      created_at_ms=n.get("created_at_ms"))
            for n in found.notes])
        await db.close()
        (folder / "imported").write_text("ok")
    db = await open_database(Workspace(folder), create=False)
    embedder = Embedder(db, encoder)
    pending = await embedder.store.pending_count()
    if pending:
        started = time.perf_counter()
        print(f"  embedding {pending} notes of {found.name} with {encoder.model_id} ...",
              flush=True)
        await embedder.catch_up()
        print(f"  ... {time.perf_counter() - started:.0f} s", flush=True)
    await db.close()
    return folder


def bank_vectors(folder: Path, model: str) -> dict[str, DenseBank]:
    conn = sqlite3.connect(f"file:{folder / 'tether.db'}?mode=ro", uri=True)
    rows: dict[str, tuple[list[str], list[np.ndarray]]] = {}
    for ref, namespace, blob in conn.execute(
            "SELECT ref, namespace, vector FROM memory_vectors WHERE model = ?", (model,)):
        ids, vectors = rows.setdefault(namespace, ([], []))
        ids.append(ref.removeprefix("note:"))
        vectors.append(np.frombuffer(blob, dtype="<f4"))
    conn.close()
    return {ns: DenseBank(ids, np.stack(vs)) for ns, (ids, vs) in rows.items()}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class Asker:
    """Asks questions as a task would (one run per system, one node per question)."""

    def __init__(self, db: Database, encoder: PreparedEncoder, settings: MemorySettings) -> None:
        self.db = db
        self.encoder = encoder
        self.runtime = MemoryRuntime(db, settings=settings, timeout_ms=60_000)
        assert self.runtime.semantic is not None
        self.runtime.semantic._encoder = encoder  # the one loaded encoder of this process
        self.runs = RunStore(db)
        self.run_ids: dict[str, str] = {}

    async def ask(self, system: str, mode: str, question: dict[str, Any]) -> dict[str, Any]:
        if system not in self.run_ids:
            self.run_ids[system] = (await self.runs.create_run(f"bench-{system}")).run_id
        run_id = self.run_ids[system]
        config = MemoryConfig(banks=question["banks"], recall=question["question"], mode=mode)
        self.encoder.queries._vectors.clear()  # a fresh question: its embedding is not cached
        started = time.perf_counter()
        prepared = await self.runtime.block_for(run_id, question["id"], 0, 1, config,
                                                question["question"])
        took = (time.perf_counter() - started) * 1000
        record = await self.runs.get_memory_block(run_id, question["id"], 0)
        items = record.items if record is not None else []
        ranked = [str(i["id"]).removeprefix("note:") for i in items]
        kept = [str(i["id"]).removeprefix("note:") for i in items if i.get("included", True)]
        return {"ranked": ranked, "block": kept, "ms": took, "degraded": prepared.degraded,
                "warning": prepared.warning}


def scores(question: dict[str, Any], ranked: list[str]) -> dict[str, float]:
    evidence = set(question["evidence"])
    out = {}
    for k in (5, 10):
        got = evidence & set(ranked[:k])
        out[f"hit@{k}"] = 1.0 if got else 0.0
        out[f"recall@{k}"] = len(got) / len(evidence)
    return out


async def evaluate(found: RecallSet, folder: Path, encoder: PreparedEncoder,
                   settings: MemorySettings, splits: tuple[str, ...],
                   systems: tuple[str, ...] = MODES, baselines: bool = True) -> dict[str, Any]:
    """Every question of ``splits`` asked by each system; metrics per split."""
    db = await open_database(Workspace(folder), create=False)
    asker = Asker(db, encoder, settings)
    notes_by_bank: dict[str, tuple[list[str], list[str]]] = {}
    for note in found.notes:
        ids, texts = notes_by_bank.setdefault(note["namespace"], ([], []))
        ids.append(note["id"])
        texts.append(note["body"])
    bm25 = {ns: Bm25sBank(ids, texts) for ns, (ids, texts) in notes_by_bank.items()} if (
        baselines) else {}
    dense = bank_vectors(folder, encoder.model_id) if baselines else {}
    report: dict[str, Any] = {}
    for split in splits:
        questions = found.split(split)
        per: dict[str, list[dict[str, float]]] = {}
        times: dict[str, list[float]] = {}
        kept: dict[str, list[int]] = {}
        for question in questions:
            bank = question["banks"][0]
            for system in systems:
                answer = await asker.ask(system, system, question)
                per.setdefault(system, []).append(scores(question, answer["ranked"]))
                times.setdefault(system, []).append(answer["ms"])
                evidence = set(question["evidence"])
                found_ev = len(evidence & set(answer["ranked"]))
                in_block = len(evidence & set(answer["block"]))
                kept.setdefault(system, [0, 0])
                kept[system][0] += in_block
                kept[system][1] += found_ev
            if baselines:
                words = bm25[bank].top(question["question"], 100)
                vector = encoder.inner.embed_query(question["question"])
                near = dense[bank].top(vector, 100)
                for name, ranked in (("bm25s", words), ("dense", near),
                                     ("RRF bm25s+dense", rrf([words, near]))):
                    per.setdefault(name, []).append(scores(question, ranked))
        table = {}
        for system, rows in per.items():
            entry: dict[str, Any] = {key: round(statistics.mean(r[key] for r in rows), 3)
                                     for key in rows[0]}
            if system in times:
                entry["p50 ms"] = round(statistics.median(times[system]), 1)
                entry["p95 ms"] = round(percentile(times[system], 0.95), 1)
                inside, total = kept[system]
                entry["evidence in block"] = round(inside / total, 3) if total else None
            table[system] = entry
        paired = {}
        if "hybrid" in per:
            base = [r["hit@10"] for r in per["hybrid"]]
            for other in per:
                if other != "hybrid":
                    paired[f"hybrid - {other}"] = paired_bootstrap(
                        base, [r["hit@10"] for r in per[other]])
        report[split] = {"questions": len(questions), "systems": table,
                         "paired hit@10": paired}
    await db.close()
    return report


def print_report(name: str, report: dict[str, Any]) -> None:
    for split, part in report.items():
        print(f"\n{name} / {split} ({part['questions']} questions)")
        print(f"{'system':22} {'hit@5':>6} {'hit@10':>6} {'rec@5':>6} {'rec@10':>6} "
              f"{'in block':>8} {'p50 ms':>7} {'p95 ms':>7}")
        for system, m in part["systems"].items():
            print(f"{system:22} {m['hit@5']:>6.3f} {m['hit@10']:>6.3f} {m['recall@5']:>6.3f} "
                  f"{m['recall@10']:>6.3f} {str(m.get('evidence in block', '')):>8} "
                  f"{str(m.get('p50 ms', '')):>7} {str(m.get('p95 ms', '')):>7}")
        for label, p in part["paired hit@10"].items():
            print(f"  {label:30} {p['diff']:+.3f} [{p['low']:+.3f}, {p['high']:+.3f}] "
                  f"wins {p['wins']} losses {p['losses']}")


def sweep_variants() -> dict[str, Callable[[MemoryRuntime], None]]:
    """One constant changed at a time from the defaults (see the module docstring)."""
    old_echo = search_policy.is_question_echo

    def echo_rule(rule: Callable[..., bool]) -> Callable[[MemoryRuntime], None]:
        def apply(runtime: MemoryRuntime) -> None:
            term_ranking.is_question_echo = rule  # type: ignore[assignment]
            semantic_recall.is_question_echo = rule  # type: ignore[assignment]
        return apply

    def any_question(terms: Any, matched: Any, text: str) -> bool:  # the rule before 22.2
        shared = len(set(matched) & set(terms))
        return bool(terms) and "?" in text and shared >= max(2, math.ceil(0.5 * len(terms)))

    def fusion(kind: str, weights: tuple[float, float],
               k: int = search_policy.HYBRID_RRF_K) -> Callable[[MemoryRuntime], None]:
        def apply(runtime: MemoryRuntime) -> None:
            assert runtime.semantic is not None
            runtime.hybrid = HybridRecallBackend(runtime.db, keyword=runtime.keyword,
                                                 semantic=runtime.semantic, fusion=kind,
                                                 weights=weights, rrf_k=k)
        return apply

    def weak(terms: int, share: float, fraction: float = 0.0
             ) -> Callable[[MemoryRuntime], None]:
        def apply(runtime: MemoryRuntime) -> None:
            assert runtime.semantic is not None
            runtime.hybrid = HybridRecallBackend(runtime.db, keyword=runtime.keyword,
                                                 semantic=runtime.semantic,
                                                 weak_keyword=(terms, share, fraction))
        return apply

    def original_query_graph(runtime: MemoryRuntime) -> None:
        assert runtime.semantic is not None and runtime.semantic._encoder is not None
        inner = runtime.semantic._encoder.inner  # type: ignore[attr-defined]
        inner.query_session = inner.session  # queries on the documents' float graph

    def query_graph(parts: str) -> Callable[[MemoryRuntime], None]:
        def apply(runtime: MemoryRuntime) -> None:
            from engine.memory.onnx_encoder import _session, _verified_model
            from engine.memory.onnx_query_model import query_model

            assert runtime.semantic is not None and runtime.semantic._encoder is not None
            derived, how = query_model(*_verified_model(), parts)
            assert derived is not None, how
            runtime.semantic._encoder.inner.query_session = _session(  # type: ignore[attr-defined]
                derived)
        return apply

    def floor(value: float) -> Callable[[MemoryRuntime], None]:
        def apply(runtime: MemoryRuntime) -> None:
            semantic_recall.MIN_SIMILARITY = value
        return apply

    return {
        "default": lambda runtime: None,
        "echo: any '?' (old)": echo_rule(any_question),
        "echo: off": echo_rule(lambda *a: False),
        "echo: answer terms (new)": echo_rule(old_echo),
        "fusion: normalised 0.5/1": fusion("normalised", (0.5, 1.0)),
        "fusion: normalised 1/1": fusion("normalised", (1.0, 1.0)),
        "fusion: normalised 1.5/1": fusion("normalised", (1.5, 1.0)),
        "fusion: normalised 2/1": fusion("normalised", (2.0, 1.0)),
        "fusion: RRF k=60": fusion("rrf", (1.0, 1.0), 60),
        "fusion: RRF k=10": fusion("rrf", (1.0, 1.0), 10),
        "fusion: RRF k=5": fusion("rrf", (1.0, 1.0), 5),
        "fusion: RRF k=2": fusion("rrf", (1.0, 1.0), 2),
        "fusion: RRF k=5, keyword 0.75": fusion("rrf", (0.75, 1.0), 5),
        "fusion: RRF k=5, keyword 1.25": fusion("rrf", (1.25, 1.0), 5),
        "adaptive keyword: off": weak(0, 1.0),
        "adaptive keyword: <2 terms x0.5": weak(2, 0.5),
        "adaptive keyword: <2 terms x0.25": weak(2, 0.25),
        "adaptive keyword: <2 terms x0": weak(2, 0.0),
        "adaptive keyword: <3 terms x0.5": weak(3, 0.5),
        "adaptive keyword: <half the terms x0.5": weak(0, 0.5, 0.5),
        "adaptive keyword: <half the terms x0.25": weak(0, 0.25, 0.5),
        "adaptive keyword: <2 terms or <half x0.5": weak(2, 0.5, 0.5),
        "adaptive keyword: <60% of the terms x0.5": weak(0, 0.5, 0.6),
        "query graph: original (float)": original_query_graph,
        "query graph: int8 all products": query_graph("all"),
        "query graph: int8 feed-forward products only": query_graph("ffn"),
        "similarity floor 0.3": floor(0.3),
        "similarity floor 0.25": floor(0.25),
        "similarity floor 0.2": floor(0.2),
        "similarity floor 0.1": floor(0.1),
        "similarity floor 0.0": floor(0.0),
    }


async def sweep(sets: list[RecallSet], encoder: PreparedEncoder,
                settings: MemorySettings, only: list[str] | None = None) -> dict[str, Any]:
    saved = (term_ranking.is_question_echo, semantic_recall.is_question_echo,
             semantic_recall.MIN_SIMILARITY)
    query_session = getattr(encoder.inner, "query_session", None)
    out: dict[str, Any] = {}
    for label, apply in sweep_variants().items():
        if only and label not in only:
            continue
        row = {}
        for found in sets:
            folder = await workspace_for(found, encoder)
            db = await open_database(Workspace(folder), create=False)
            asker = Asker(db, encoder, settings)
            apply(asker.runtime)
            hits = []
            for question in found.split("tuning"):
                answer = await asker.ask(f"sweep {label}", "hybrid", question)
                hits.append(scores(question, answer["ranked"])["hit@10"])
            row[found.name] = round(statistics.mean(hits), 3) if hits else None
            await db.close()
            (term_ranking.is_question_echo, semantic_recall.is_question_echo,
             semantic_recall.MIN_SIMILARITY) = saved  # type: ignore[assignment]
            if query_session is not None:
                encoder.inner.query_session = query_session
        out[label] = row
        print(f"{label:28} " + "  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=os.environ.get("TETHER_LOCOMO"),
                        help="LoCoMo: a folder of its per-conversation files, or its zip")
    parser.add_argument("--encoder", default=AUTO, help="the encoder to measure")
    parser.add_argument("--sets", nargs="+", default=["chat", "docs", "locomo"])
    parser.add_argument("--sweep", action="store_true", help="tuning-split ablations only")
    parser.add_argument("--only", nargs="+", help="the sweep's variants to run (labels)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    encoder = load_encoder(args.encoder)
    if encoder is None:
        raise SystemExit("a local encoder is needed: pip install -e '.[bench,semantic]'")
    settings = MemorySettings(encoder=args.encoder)
    sets = [committed_set(n) for n in args.sets if n != "locomo"]
    if "locomo" in args.sets:
        if args.locomo is None or not Path(args.locomo).exists():
            print("LoCoMo is not here (give --locomo PATH or TETHER_LOCOMO); its rows are "
                  "left out of this run.")
        else:
            sets.append(locomo_set(Path(args.locomo)))
    if args.sweep:
        result = await sweep(sets, encoder, settings, args.only)
        target = RESULTS.with_name("bench_recall_quality_sweep.json")
        if args.only and target.exists():  # a partial sweep updates its rows, keeps the rest
            result = {**json.loads(target.read_text())["hit@10 on the tuning splits"], **result}
        target.write_text(json.dumps({"encoder": encoder.model_id, "machine": machine(),
                                      "hit@10 on the tuning splits": result}, indent=2) + "\n")
        print(f"wrote {target}")
        return
    reports = {}
    for found in sets:
        folder = await workspace_for(found, encoder)
        reports[found.name] = await evaluate(found, folder, encoder, settings,
                                             ("tuning", "held-out"))
        print_report(found.name, reports[found.name])
    target = RESULTS if args.encoder == AUTO else RESULTS.with_name(
        f"bench_recall_quality_{args.encoder}.json")
    target.write_text(json.dumps({
        "machine": machine(), "encoder": encoder.model_id,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "sets": {f.name: {"notes": len(f.notes), "questions": len(f.questions)} for f in sets},
        "results": reports,
    }, indent=2) + "\n")
    print(f"\nwrote {target}; load average {os.getloadavg()}")


if __name__ == "__main__":
    asyncio.run(main())
