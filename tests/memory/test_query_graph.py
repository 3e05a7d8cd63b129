"""The query path. The encoder's int8-arithmetic graph (engine/memory/onnx_query_model.py),
built from the real verified model into a real cache folder: its vectors agree with the
documents' graph, it is built once and then reused, a damaged file is built again, and without
it queries still work. The worker that encodes a query ranks it too once the banks' snapshot is
in, and a failed snapshot fails the recall without holding the worker."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from semantic_support import require_semantic

SENTENCES = [
    "The children went to the park.",
    "My kids love the playground.",
    "Database migration failed with a lock error.",
    "Which database does payments-api use?",
]


@pytest.fixture(autouse=True)
def _semantic() -> None:
    require_semantic()


def _agreement(encoder: object) -> np.ndarray:
    documents = encoder.embed(SENTENCES)  # type: ignore[attr-defined]
    queries = np.stack([encoder.embed_query(s) for s in SENTENCES])  # type: ignore[attr-defined]
    return np.sum(documents * queries, axis=1)


def _built(folder: Path) -> list[Path]:
    return sorted(folder.glob("minilm-*-query-int8-*.onnx"))


def test_queries_use_the_int8_graph_built_once(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.memory.onnx_encoder import OnnxMiniLM

    monkeypatch.setenv("TETHER_MODEL_CACHE", str(tmp_path / "cache"))
    first = OnnxMiniLM()
    assert first.query_graph.startswith("int8 arithmetic (built"), first.query_graph
    assert first.query_session is not first.session
    [derived] = _built(tmp_path / "cache")
    assert Path(f"{derived}.sha256").read_text().strip()
    agreement = _agreement(first)
    assert (agreement > 0.98).all() and (agreement < 0.99999).all()  # its own arithmetic
    kids, park, database = (first.embed_query(s) for s in SENTENCES[1::-1] + SENTENCES[2:3])
    assert kids @ park > 0.4 > kids @ database
    again = OnnxMiniLM()
    assert again.query_graph.startswith("int8 arithmetic (cached"), again.query_graph
    assert np.array_equal(again.embed_query(SENTENCES[3]), first.embed_query(SENTENCES[3]))


@pytest.mark.slow
def test_a_damaged_query_graph_is_built_again(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.memory.onnx_encoder import OnnxMiniLM

    monkeypatch.setenv("TETHER_MODEL_CACHE", str(tmp_path))
    OnnxMiniLM()
    [derived] = _built(tmp_path)
    derived.write_bytes(derived.read_bytes()[:1000])
    rebuilt = OnnxMiniLM()
    assert rebuilt.query_graph.startswith("int8 arithmetic (built"), rebuilt.query_graph
    assert (_agreement(rebuilt) > 0.98).all()


def test_without_a_cache_folder_queries_use_the_documents_graph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.memory.onnx_encoder import OnnxMiniLM

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("TETHER_MODEL_CACHE", str(blocked))
    encoder = OnnxMiniLM()
    assert encoder.query_graph.startswith("original (") and "Error" in encoder.query_graph
    assert encoder.query_session is encoder.session
    assert np.allclose(_agreement(encoder), 1.0, atol=1e-6)
    assert blocked.read_text() == "a file where the cache folder would be"


async def test_the_worker_that_encodes_also_ranks_when_the_snapshot_is_in() -> None:
    import asyncio
    import threading

    from engine.memory.semantic_recall import _encode_beside

    go = threading.Event()

    def encode() -> np.ndarray:
        assert go.wait(60)  # released only once the snapshot is in
        return np.ones(384, dtype=np.float32) / np.sqrt(384)

    async def snapshot() -> list:  # type: ignore[type-arg]
        asyncio.get_running_loop().call_soon(go.set)
        return []

    views, vector, found = await _encode_beside(encode, snapshot(), 16)
    assert views == [] and vector.shape == (384,)
    assert found == []  # ranked on the worker: no second hop


async def test_a_failed_snapshot_fails_the_recall_and_frees_the_worker() -> None:
    import asyncio

    from engine.memory.semantic_recall import _encode_beside

    finished = asyncio.Event()
    loop = asyncio.get_running_loop()

    def encode() -> np.ndarray:
        loop.call_soon_threadsafe(finished.set)
        return np.zeros(384, dtype=np.float32)

    async def snapshot() -> list:  # type: ignore[type-arg]
        raise RuntimeError("the bank could not be read")

    with pytest.raises(RuntimeError, match="could not be read"):
        await _encode_beside(encode, snapshot(), 16)
    await asyncio.wait_for(finished.wait(), 60)
