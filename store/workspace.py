"""Finding and creating the workspace folder (``.tether/``) that holds ``tether.db``.

Resolution order: an explicit ``--workspace DIR``, then ``TETHER_WORKSPACE``, then the first
``.tether/`` found walking up from the current directory (like git finds ``.git``), and finally
``./.tether`` when none exists. The folder is only created on the first write, owner-only.
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
    """Return the nearest ``.tether`` folder at or above ``start``, or None."""
    current = start.resolve()
    for folder in (current, *current.parents):
        candidate = folder / WORKSPACE_DIRNAME
        if candidate.is_dir():
            return candidate
    return None


def resolve_workspace(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: Path | None = None,
    environ: dict[str, str] | None = None,
) -> Workspace:
    """Pick the workspace folder following the documented resolution order."""
    env = os.environ if environ is None else environ
    if explicit:
        return Workspace(Path(explicit).expanduser().resolve())
    from_env = env.get(ENV_VAR)
    if from_env:
        return Workspace(Path(from_env).expanduser().resolve())
    here = (cwd or Path.cwd()).resolve()
    found = find_workspace_root(here)
    return Workspace(found if found is not None else here / WORKSPACE_DIRNAME)
