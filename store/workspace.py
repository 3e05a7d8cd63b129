"""Finding and creating the workspace folder (``.tether/``) that holds ``tether.db``.

Resolution order: an explicit ``--workspace DIR``, then ``TETHER_WORKSPACE``, then the first
``.tether/`` found walking up from the current directory (like git finds ``.git``), and finally
``./.tether`` when none exists. The folder is only created on the first write, owner-only.

Two forms people reach for are accepted as well: a named folder that holds no ``tether.db`` but
a ``.tether/`` with one (the project folder) means that ``.tether/``; and walking up stops at a
folder that is itself a workspace (holds ``tether.db``, as ``tether-demo/`` does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

WORKSPACE_DIRNAME = ".tether"
DATABASE_FILENAME = "tether.db"
ARTIFACTS_DIRNAME = "artifacts"
CONFIG_FILENAME = "config.toml"
ENV_VAR = "TETHER_WORKSPACE"


@dataclass(frozen=True)
class Workspace:
    """A workspace folder and the paths inside it."""

    root: Path

    @property
    def database_path(self) -> Path:
        return self.root / DATABASE_FILENAME

    @property
    def artifacts_dir(self) -> Path:
        return self.root / ARTIFACTS_DIRNAME

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILENAME

    def exists(self) -> bool:
        """True when the workspace database has been created."""
        return self.database_path.exists()

    def ensure(self) -> None:
        """Create the folder and its artifacts folder owner-only (0700), with any missing
        parents; folders that already exist keep their permissions (a write never chmods)."""
        make_private_dirs(self.artifacts_dir)


def make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and every missing parent with mode 0700 (``Path.mkdir(parents=True)``
    would give the parents the umask's default mode instead)."""
    missing: list[Path] = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            if not path.is_dir():
                raise


def find_workspace_root(start: Path) -> Path | None:
    """Return the nearest workspace at or above ``start`` (a ``.tether`` folder, or a folder
    holding ``tether.db`` itself), or None."""
    current = start.resolve()
    for folder in (current, *current.parents):
        candidate = folder / WORKSPACE_DIRNAME
        if candidate.is_dir():
            return candidate
        if (folder / DATABASE_FILENAME).is_file():
            return folder
    return None


def named_workspace(folder: Path) -> Path:
    """The workspace a person named: ``folder`` itself, or its ``.tether/`` when ``folder`` is
    a project folder (no ``tether.db`` of its own, a ``.tether/`` holding one)."""
    inner = folder / WORKSPACE_DIRNAME
    if not (folder / DATABASE_FILENAME).exists() and (inner / DATABASE_FILENAME).is_file():
        return inner
    return folder


def resolve_workspace(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: Path | None = None,
    environ: dict[str, str] | None = None,
) -> Workspace:
    """Pick the workspace folder following the documented resolution order."""
    env = os.environ if environ is None else environ
    if explicit:
        return Workspace(named_workspace(Path(explicit).expanduser().resolve()))
    from_env = env.get(ENV_VAR)
    if from_env:
        return Workspace(named_workspace(Path(from_env).expanduser().resolve()))
    here = (cwd or Path.cwd()).resolve()
    found = find_workspace_root(here)
    return Workspace(found if found is not None else here / WORKSPACE_DIRNAME)
