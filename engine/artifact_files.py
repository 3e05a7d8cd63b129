"""Artifact files on disk: per-attempt stream logs and raw outputs, and run-level files that
tasks write and read through ``ctx.artifacts``.

Layout under the workspace's ``artifacts/`` folder::

    <run>/<node>/<attempt>/stream.log                 iteration 0
    <run>/<node>/iteration-<n>/<attempt>/stream.log   loop iteration n > 0
    <run>/<node>/<attempt>/raw-output.txt             agent text that failed validation
    <run>/files/<name>                                written with ctx.artifacts.write_text

``<node>`` is :func:`store.model.ids.node_folder_name` of the node id (distinct for distinct ids,
bounded, readable). Big blobs go here, not into prompts or database rows. Folders are created
0700 and files 0600; every path is checked to resolve inside ``artifacts/`` before it is
written or deleted. An attempt's folder and stream log appear with the agent's first output.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from store.errors import InvalidInputError
from store.model.ids import node_folder_name
from store.runs.artifact_paths import inside, run_dir
from store.workspace.layout import make_private_dirs

STREAM_LOG = "stream.log"
RAW_OUTPUT = "raw-output.txt"
_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")


def attempt_dir(
    artifacts_root: Path, run_id: str, node_id: str, iteration: int, attempt: int
) -> Path:
    """The folder holding one attempt's files (see the module docstring for the layout)."""
    folder = _attempt_folder(run_dir(artifacts_root, run_id), node_id, iteration, attempt)
    return inside(artifacts_root, folder)


def _attempt_parts(node_id: str, iteration: int, attempt: int) -> tuple[str, ...]:
    """The names from a run's folder down to an attempt's (see the module docstring)."""
    if iteration:
        return node_folder_name(node_id), f"iteration-{int(iteration)}", str(int(attempt))
    return node_folder_name(node_id), str(int(attempt))


def _attempt_folder(run_folder: Path, node_id: str, iteration: int, attempt: int) -> Path:
    return run_folder.joinpath(*_attempt_parts(node_id, iteration, attempt))


def stream_log_path(
    artifacts_root: Path, run_id: str, node_id: str, iteration: int, attempt: int
) -> Path:
    """Path of an attempt's live stream log."""
    return attempt_dir(artifacts_root, run_id, node_id, iteration, attempt) / STREAM_LOG


class AttemptFolders:
    """Where a run's attempts keep their files, with the run's folder validated and checked
    once (one stream log path is made per attempt; node folder names never hold ``/`` nor
    start with ``.``, so a checked run folder keeps every attempt folder inside)."""

    def __init__(self, artifacts_root: Path, run_id: str) -> None:
        self.run_folder = run_dir(artifacts_root, run_id)

    def stream_log(self, node_id: str, iteration: int, attempt: int) -> Path:
        """The attempt's stream log (the same path as :func:`stream_log_path`), made with one
        join (one per attempt: each ``/`` parses and builds a path of its own)."""
        return self.run_folder.joinpath(*_attempt_parts(node_id, iteration, attempt), STREAM_LOG)


def ensure_private_folder(folder: Path) -> Path:
    """Create ``folder`` and its missing parents owner-only (0700) and return it."""
    make_private_dirs(folder)
    return folder


def append_private_text(path: Path, text: str) -> None:
    """Append ``text`` to ``path``, creating it owner-only (0600); links are not followed."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(text)


def write_private_bytes(path: Path, data: bytes) -> Path:
    """Write (replace) ``path`` atomically, owner-only (0600), and return it."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(temp, path)
    return path


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
        self.folder = run_dir(artifacts_root, run_id) / "files"
        self._prefix = f"{run_id}/files/"  # a valid run id is its own folder name
        self._stored = stored

    def path(self, name: str) -> Path:
        """Where artifact ``name`` lives. Names are plain file names (no folders, no '..')."""
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
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
        ensure_private_folder(self.folder)
        return write_private_bytes(target, data)

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
