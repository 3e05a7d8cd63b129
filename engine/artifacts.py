"""Artifact files on disk: per-attempt stream logs and raw outputs, and run-level files that
tasks write and read through ``ctx.artifacts``.

Layout under the workspace's ``artifacts/`` folder::

    <run>/<node>/<attempt>/stream.log                 iteration 0
    <run>/<node>/iteration-<n>/<attempt>/stream.log   loop iteration n > 0
    <run>/<node>/<attempt>/raw-output.txt             agent text that failed validation
    <run>/files/<name>                                written with ctx.artifacts.write_text

Big blobs go here, not into prompts or database rows. Folders are created owner-only; an
attempt's folder and stream log appear with the agent's first output.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from store.errors import InvalidInputError

STREAM_LOG = "stream.log"
RAW_OUTPUT = "raw-output.txt"
_SAFE = re.compile(r"[^A-Za-z0-9_.\-\[\]]")
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}$")


def safe_part(text: str) -> str:
    """A path component made from an id: unsafe characters become '_' (never '..' or '/')."""
    cleaned = _SAFE.sub("_", text) or "_"
    return "_" + cleaned if cleaned.startswith(".") else cleaned


def _attempt_parts(
    artifacts_root: Path, run_id: str, node_id: str, iteration: int, attempt: int
) -> list[str]:
    return _node_parts(
        os.path.join(str(artifacts_root), safe_part(run_id)), node_id, iteration, attempt
    )


def _node_parts(run_folder: str, node_id: str, iteration: int, attempt: int) -> list[str]:
    parts = [run_folder, safe_part(node_id)]
    if iteration:
        parts.append(f"iteration-{iteration}")
    parts.append(str(attempt))
    return parts


def attempt_dir(
    artifacts_root: Path, run_id: str, node_id: str, iteration: int, attempt: int
) -> Path:
    """The folder holding one attempt's files (see the module docstring for the layout)."""
    return Path(os.path.join(*_attempt_parts(artifacts_root, run_id, node_id, iteration, attempt)))


def stream_log_path(
    artifacts_root: Path, run_id: str, node_id: str, iteration: int, attempt: int
) -> Path:
    """Path of an attempt's live stream log (built in one step: one is made per attempt)."""
    parts = _attempt_parts(artifacts_root, run_id, node_id, iteration, attempt)
    return Path(os.path.join(*parts, STREAM_LOG))


class AttemptFolders:
    """Where a run's attempts keep their files, with the run's part of the path worked out
    once (one stream log path is made per attempt)."""

    def __init__(self, artifacts_root: Path, run_id: str) -> None:
        self.run_folder = os.path.join(str(artifacts_root), safe_part(run_id))

    def stream_log(self, node_id: str, iteration: int, attempt: int) -> Path:
        """The attempt's stream log (the same path as :func:`stream_log_path`)."""
        return Path(
            os.path.join(*_node_parts(self.run_folder, node_id, iteration, attempt), STREAM_LOG)
        )


class RunArtifacts:
    """Run-level artifact files tasks share: ``ctx.artifacts.write_text("plan.md", text)``.

    On a PostgreSQL workspace the files also live in the database (the run's artifact mirror
    copies them there), and ``stored`` reads one back by its path inside ``artifacts/``: a run
    resumed by a worker on another host still reads what the first worker wrote.
    """

    def __init__(
        self,
        artifacts_root: Path,
        run_id: str,
        stored: Callable[[str], bytes | None] | None = None,
    ) -> None:
        self.folder = artifacts_root / safe_part(run_id) / "files"
        self._prefix = f"{safe_part(run_id)}/files/"
        self._stored = stored

    def path(self, name: str) -> Path:
        """Where artifact ``name`` lives. Names are plain file names (no folders, no '..')."""
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise InvalidInputError(
                f"Artifact name {name!r} must be a plain file name "
                "(letters, digits, '_', '.', '-')."
            )
        return self.folder / name

    def write_text(self, name: str, text: str) -> Path:
        """Write (replace) a text artifact atomically and return its path."""
        return self.write_bytes(name, text.encode("utf-8"))

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write (replace) a binary artifact atomically and return its path."""
        target = self.path(name)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with open(temp, "wb") as handle:
            handle.write(data)
        os.chmod(temp, 0o600)
        os.replace(temp, target)
        return target

    def read_text(self, name: str) -> str:
        """Read a text artifact (NotFound-style InvalidInputError when missing)."""
        return self.read_bytes(name).decode("utf-8")

    def read_bytes(self, name: str) -> bytes:
        """Read a binary artifact (from the database when another host wrote it)."""
        target = self.path(name)
        if target.exists():
            return target.read_bytes()
        stored = self._stored(self._prefix + name) if self._stored is not None else None
        if stored is None:
            raise InvalidInputError(f"There is no artifact {name!r} in this run.")
        return stored

    def exists(self, name: str) -> bool:
        """True when artifact ``name`` has been written (here or, stored, elsewhere)."""
        if self.path(name).exists():
            return True
        return self._stored is not None and self._stored(self._prefix + name) is not None
