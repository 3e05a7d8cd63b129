"""Semantic tests need the ``semantic`` extra and the model weights. Locally they are skipped
with the install command when missing; in CI (``CI`` set) a missing model fails the run
instead, so the semantic path can never silently go untested."""

from __future__ import annotations

import os

import pytest

from engine.memory.encoders import SEMANTIC_HINT, semantic_available


def require_semantic() -> None:
    """Skip (locally) or fail (in CI) when semantic recall cannot run here."""
    if semantic_available():
        return
    message = f"semantic recall is not installed: {SEMANTIC_HINT}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
