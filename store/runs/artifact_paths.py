"""Where a run's artifact files live, checked: nothing outside ``artifacts/`` is ever written or
deleted because of an id.

The store deletes a run's folder with the run; the engine writes attempt folders under it
(``engine/artifacts.py``). Both go through :func:`run_dir`, which validates the run id and
checks that the folder resolves strictly inside the workspace's ``artifacts/`` folder.
"""

from __future__ import annotations

from pathlib import Path

from store.errors import InvalidInputError
from store.model.ids import validate_run_id


def inside(artifacts_root: Path, path: Path) -> Path:
    """Return ``path`` when it resolves strictly inside ``artifacts_root``, else raise
    InvalidInputError (a symlink pointing elsewhere resolves elsewhere, so it is refused)."""
    root = artifacts_root.resolve()
    resolved = path.resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise InvalidInputError(f"{path} is not inside the workspace's artifacts folder.")
    return path


def run_dir(artifacts_root: Path, run_id: str) -> Path:
    """A run's artifact folder, ``artifacts/<run>`` (the run id validated, the path checked)."""
    return inside(artifacts_root, artifacts_root / validate_run_id(run_id))


def delete_run_dir(artifacts_root: Path, run_id: str) -> None:
    """Remove a run's artifact folder, if there is one; nothing outside it is touched."""
    folder = run_dir(artifacts_root, run_id)
    if folder.is_symlink() or not folder.is_dir():
        return
    import shutil  # only when a run's files are deleted

    shutil.rmtree(folder, ignore_errors=True)
