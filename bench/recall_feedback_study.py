"""Pseudo-relevance feedback on the tuning splits only (issue 22): does moving the query vector
towards its first results (Rocchio) let hybrid beat dense alone on chat and docs?

    python bench/recall_feedback_study.py            # after recall_fusion_study.py has run

Replays the fusion study's captured candidates (no held-out question is asked): for each
tuning question the query is encoded again, moved by ``beta`` times the mean of the first
``k`` vectors of dense's ranking (*dense feedback*) or of Tether's fused ranking (*fused
feedback*), and the bank ranked again by cosine; each ranking is scored alone and fused with
keyword's candidates by Tether's default fusion. Prints hit@10 with the paired difference
against dense and the questions won / lost.
"""

from __future__ import annotations

import asyncio
import pickle
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_recall_quality import CACHE, bank_vectors, workspace_for
from recall_baselines import DenseBank, paired_bootstrap
from recall_fusions import Candidates, fusions, rrf
from recall_sets_load import committed_set

from engine.memory.encoders import AUTO, load_encoder

DEPTHS = (3, 5)
BETAS = (0.3, 0.6, 1.0)


def hit10(evidence: list[str], ranked: list[str]) -> float:
    return 1.0 if set(evidence) & set(ranked[:10]) else 0.0


def moved(query: np.ndarray, vectors: np.ndarray, beta: float) -> np.ndarray:
    """The query moved towards the mean of ``vectors`` (Rocchio), unit length."""
    if not len(vectors):
        return query
    out = query + beta * vectors.mean(axis=0)
    return out / np.linalg.norm(out)


def ranked(bank: DenseBank, vector: np.ndarray) -> list[tuple[str, float]]:
    """The bank's 50 nearest notes to ``vector`` (ids as the captures spell them)."""
    sims = bank.vectors @ vector
    return [("note:" + bank.ids[i], float(sims[i]))
            for i in np.argsort(-sims, kind="stable")[:50]]


def record(per: dict[str, list[float]], label: str, row: dict[str, Any],
           semantic: list[tuple[str, float]]) -> None:
    """hit@10 of ``semantic`` alone and fused with the question's keyword candidates."""
    per.setdefault(label, []).append(
        hit10(row["evidence"], [i.removeprefix("note:") for i, _ in semantic]))
    found: Candidates = row["candidates"]
    with_keyword = Candidates(found.terms, found.keyword, semantic, found.echo, found.idf)
    per.setdefault(f"hybrid on {label}", []).append(hit10(row["evidence"], rrf()(with_keyword)))


async def main() -> None:
    encoder = load_encoder(AUTO)
    if encoder is None:
        raise SystemExit("a local encoder is needed: pip install -e '.[bench,semantic]'")
    scores: dict[str, dict[str, list[float]]] = {}
    for name in ("chat", "docs"):
        cached = CACHE / f"fusion-study-{AUTO}-{name}.pickle"
        if not cached.exists():
            raise SystemExit(f"run bench/recall_fusion_study.py first ({cached} is missing)")
        found = committed_set(name)
        banks = bank_vectors(await workspace_for(found, encoder), encoder.model_id)
        rows = pickle.loads(cached.read_bytes())
        per: dict[str, list[float]] = scores.setdefault(name, {})
        for question, row in zip(found.split("tuning"), rows, strict=True):
            bank = banks[question["banks"][0]]
            where = {note: n for n, note in enumerate(bank.ids)}
            query = encoder.inner.embed_query(question["question"])
            query = query / np.linalg.norm(query)
            fused = fusions()["default"](row["candidates"])
            first = ranked(bank, query)
            record(per, "dense", row, first)
            for k in DEPTHS:
                for beta in BETAS:
                    top = [where[i.removeprefix("note:")] for i, _ in first[:k]]
                    record(per, f"dense feedback k={k} beta={beta}", row,
                           ranked(bank, moved(query, bank.vectors[top], beta)))
                    top = [where[i] for i in fused[:k] if i in where]
                    record(per, f"fused feedback k={k} beta={beta}", row,
                           ranked(bank, moved(query, bank.vectors[top], beta)))
    for label in scores["chat"]:
        line = f"{label:38}"
        for name, per in scores.items():
            diff = paired_bootstrap(per[label], per["dense"])
            line += (f"  {name} {statistics.mean(per[label]):.3f} ({diff['diff']:+.3f}, "
                     f"{diff['wins']} / {diff['losses']})")
        print(line)


if __name__ == "__main__":
    asyncio.run(main())
