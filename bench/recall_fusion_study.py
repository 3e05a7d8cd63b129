"""Fusion study on the tuning splits only (issue 22): the candidates hybrid recall fuses for
every tuning question, captured once through the block a task gets, then every fusion of
``bench/recall_fusions.py`` replayed on them in seconds, against Tether's default and dense.

    python bench/recall_fusion_study.py --locomo PATH                    # MiniLM (the default)
    python bench/recall_fusion_study.py --locomo PATH --encoder e5-small-q4

No held-out question is asked: choosing a fusion here cannot look at the held-out splits.
The default encoder reuses ``bench_recall_quality.py``'s embedded workspaces; another embeds
the tuning banks only. The replay of ``default`` is checked against the ranking the task's
block recorded (the ``replay agrees`` count: a tie broken by a note's time can differ).
Captures are cached under /tmp; results go to ``bench/results/bench_recall_fusion_study*.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_recall_quality import CACHE, RESULTS, Asker, bank_vectors, workspace_for
from recall_baselines import paired_bootstrap
from recall_fusions import Candidates, fusions
from recall_sets_load import RecallSet, committed_set, locomo_set

from engine.memory.encoders import AUTO, load_encoder
from engine.memory.recall_items import RecallItem
from engine.memory.recall_mode import MemorySettings
from engine.memory.semantic_recall import HybridRecallBackend, _with_terms
from store.db.backends import open_database
from store.search.search_policy import idf, index_terms, is_question_echo
from store.search.vector_store import Similar
from store.workspace.layout import Workspace


class Recording(HybridRecallBackend):
    """Hybrid recall that keeps the candidates of each fusion it makes."""

    seen: list[Candidates]

    def fuse(self, keyword: Sequence[RecallItem], semantic: Sequence[tuple[Similar, RecallItem]],
             terms: Sequence[str]) -> tuple[dict[str, float], float]:
        near = [_with_terms(item, terms) for _, item in semantic]
        echo = {i.id for i in [*near, *keyword]
                if is_question_echo(terms, i.matched_terms, i.text)}
        self.seen.append(Candidates(
            tuple(terms), [(i.id, i.score, tuple(i.matched_terms)) for i in keyword],
            [(item.id, sim.similarity) for sim, item in semantic], echo))
        return super().fuse(keyword, semantic, terms)


def bank_idf(found: RecallSet) -> dict[str, dict[str, float]]:
    """Each bank's idf of its terms (every imported note is live)."""
    counts: dict[str, dict[str, int]] = {}
    sizes: dict[str, int] = {}
    for note in found.notes:
        bank = counts.setdefault(note["namespace"], {})
        sizes[note["namespace"]] = sizes.get(note["namespace"], 0) + 1
        for term in set(index_terms(note["body"])):
            bank[term] = bank.get(term, 0) + 1
    return {ns: {t: idf(df, sizes[ns]) for t, df in terms.items()} for ns, terms in counts.items()}


async def capture(found: RecallSet, encoder: Any, settings: MemorySettings
                  ) -> list[dict[str, Any]]:
    """Every tuning question asked once in hybrid mode (recording its candidates) and by
    dense, the baseline."""
    folder = await workspace_for(found, encoder)
    db = await open_database(Workspace(folder), create=False)
    asker = Asker(db, encoder, settings)
    runtime = asker.runtime
    assert runtime.semantic is not None
    recording = Recording(db, keyword=runtime.keyword, semantic=runtime.semantic)
    recording.seen = []
    runtime.hybrid = recording
    dense = bank_vectors(folder, encoder.model_id)
    weights = bank_idf(found)
    rows = []
    for question in found.split("tuning"):
        recording.seen.clear()
        answer = await asker.ask("study", "hybrid", question)
        bank = question["banks"][0]
        candidates = recording.seen[-1] if recording.seen else Candidates((), [], [])
        candidates.idf = {t: weights[bank].get(t, 0.0) for t in candidates.terms}
        vector = encoder.inner.embed_query(question["question"])
        rows.append({"evidence": question["evidence"], "candidates": candidates,
                     "hybrid": answer["ranked"], "dense": dense[bank].top(vector, 50)})
    await db.close()
    return rows


def hit10(row: dict[str, Any], ranked: list[str]) -> float:
    return 1.0 if set(row["evidence"]) & set(ranked[:10]) else 0.0


def study(captured: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """hit@10 of every fusion per set, with its paired difference against the default and
    against dense."""
    out: dict[str, Any] = {}
    dense = {n: [hit10(r, r["dense"]) for r in rows] for n, rows in captured.items()}
    per: dict[str, dict[str, list[float]]] = {}
    for label, fuse in fusions().items():
        per[label] = {n: [hit10(r, fuse(r["candidates"])) for r in rows]
                      for n, rows in captured.items()}
    for label, sets in per.items():
        row: dict[str, Any] = {}
        for name, hits in sets.items():
            row[name] = {"hit@10": round(statistics.mean(hits), 3),
                         "- default": paired_bootstrap(hits, per["default"][name]),
                         "- dense": paired_bootstrap(hits, dense[name])}
        row["mean"] = round(statistics.mean(v["hit@10"] for v in row.values()), 3)
        out[label] = row
    out["dense"] = {n: round(statistics.mean(h), 3) for n, h in dense.items()}
    out["replay agrees"] = {n: sum(hit10(r, r["hybrid"]) == hit10(r, fusions()["default"](
        r["candidates"])) for r in rows) for n, rows in captured.items()}
    out["hybrid as asked"] = {n: round(statistics.mean(hit10(r, r["hybrid"]) for r in rows), 3)
                              for n, rows in captured.items()}
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=os.environ.get("TETHER_LOCOMO"))
    parser.add_argument("--encoder", default=AUTO)
    parser.add_argument("--sets", nargs="+", default=["chat", "docs", "locomo"])
    args = parser.parse_args()
    encoder = load_encoder(args.encoder)
    if encoder is None:
        raise SystemExit("a local encoder is needed: pip install -e '.[bench,semantic]'")
    settings = MemorySettings(encoder=args.encoder)
    captured: dict[str, list[dict[str, Any]]] = {}
    for name in args.sets:
        if name == "locomo":
            if args.locomo is None or not Path(args.locomo).exists():
                print("LoCoMo is not here (give --locomo PATH); it is left out.")
                continue
            found = locomo_set(Path(args.locomo))
        else:
            found = committed_set(name)
        if args.encoder != AUTO:  # the held-out banks are never asked: not embedded
            banks = {b for q in found.split("tuning") for b in q["banks"]}
            found.notes = [n for n in found.notes if n["namespace"] in banks]
            found.questions = found.split("tuning")
        cached = CACHE / f"fusion-study-{args.encoder}-{name}.pickle"
        if not cached.exists():
            cached.write_bytes(pickle.dumps(await capture(found, encoder, settings)))
        captured[name] = pickle.loads(cached.read_bytes())
    result = study(captured)
    for label, row in result.items():
        if isinstance(row, dict) and "mean" in row:
            print(f"{label:44} " + "  ".join(
                f"{n} {v['hit@10']:.3f} ({v['- dense']['diff']:+.3f} vs dense)"
                for n, v in row.items() if n != "mean") + f"  mean {row['mean']:.3f}")
    print("dense", result["dense"], "| replay agrees", result["replay agrees"],
          "| hybrid as asked", result["hybrid as asked"])
    suffix = "" if args.encoder == AUTO else f"_{args.encoder}"
    target = RESULTS.with_name(f"bench_recall_fusion_study{suffix}.json")
    target.write_text(json.dumps({"encoder": encoder.model_id, "split": "tuning",
                                  "questions": {n: len(r) for n, r in captured.items()},
                                  "fusions": result}, indent=2) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    asyncio.run(main())
