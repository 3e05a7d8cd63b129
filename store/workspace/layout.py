"""Finding and creating the workspace folder (``.tether/``) that holds ``tether.db``.

Resolution order: an explicit ``--workspace DIR``, then ``TETHER_WORKSPACE``, then the first
``.tether/`` found walking up from the current directory (like git finds ``.git``), and finally
``./.tether`` when none exists. The folder is only created on the first write, owner-only.

A team workspace keeps its data in PostgreSQL instead of ``tether.db``: its database URL comes
from ``--database-url``, then ``TETHER_DATABASE_URL``, then ``database_url`` in the workspace's
``config.toml`` (see :mod:`store.db.database_url`).

Two forms people reach for are accepted as well: a named folder that holds no ``tether.db`` but
a ``.tether/`` with one (the project folder) means that ``.tether/``; and walking up stops at a
folder that is itself a workspace (holds ``tether.db``, as ``tether-demo/`` does).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

WORKSPACE_DIRNAME = ".tether"
DATABASE_FILENAME = "tether.db"
ARTIFACTS_DIRNAME = "artifacts"
CONFIG_FILENAME = "config.toml"
ENV_VAR = "TETHER_WORKSPACE"
DATABASE_URL_ENV_VAR = "TETHER_DATABASE_URL"
FIRST_WRITE = ("the first write creates it (tether run WORKFLOW, tether notes add NAMESPACE "
               "BODY, tether memory set), or --workspace DIR names another")
"""How a workspace that is not there yet comes to be, for the sentences that find none."""


class Workspace(NamedTuple):
    """A workspace folder and the paths inside it; ``database_url`` names a PostgreSQL
    database that holds the workspace's data instead of the folder's ``tether.db``."""

    root: Path
    database_url: str | None = None

    @property
    def is_shared(self) -> bool:
        """True for a PostgreSQL (team) workspace."""
        return bool(self.database_url)

    def describe(self) -> str:
        """Where the data lives, for messages: the folder, or the database URL without its
        password."""
        if self.database_url:
            from store.db.database_url import redact_url

            return redact_url(self.database_url)
        return str(self.root)

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
        """True when the workspace database has been created (always assumed for a URL)."""
        return self.is_shared or self.database_path.exists()

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
        if _looked_at(candidate, Path.is_dir):
            return candidate
        if _looked_at(folder / DATABASE_FILENAME, Path.is_file):
            return folder
    return None


def _looked_at(path: Path, test: Callable[[Path], bool]) -> bool:
    try:
        return test(path)
    except PermissionError:
        raise permission_denied(path) from None


def permission_denied(path: Path) -> Exception:
    """The one sentence (a StorageError, exit 3) for a workspace path this user may not look
    at: usually another user's workspace, whose folder is owner-only."""
    import pwd

    from store.errors import StorageError

    owner = ""
    for candidate in (path, *path.parents):
        try:
            info = candidate.stat()
        except OSError:
            continue
        try:
            name = pwd.getpwuid(info.st_uid).pw_name
        except KeyError:
            name = f"user {info.st_uid}"
        if info.st_uid != os.geteuid():
            owner = f" ({candidate} belongs to {name}, mode {info.st_mode & 0o777:o})"
        break
    return StorageError(
        f"Permission denied for {path}{owner}; run Tether as the workspace's owner, or share "
        "it with a team through PostgreSQL (see docs/team-setup.md).",
        "permission was denied",
    )


def named_workspace(folder: Path) -> Path:
    """The workspace a person named: ``folder`` itself, or its ``.tether/`` when ``folder`` is
    a project folder (no ``tether.db`` of its own, a ``.tether/`` holding one)."""
    inner = folder / WORKSPACE_DIRNAME
    if not _looked_at(folder / DATABASE_FILENAME, Path.exists) and _looked_at(
        inner / DATABASE_FILENAME, Path.is_file
    ):
        return inner
    return folder


def resolve_workspace(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    database_url: str | None = None,
) -> Workspace:
    """Pick the workspace folder (and database URL) following the documented order."""
    env = os.environ if environ is None else environ
    if explicit:
        root = named_workspace(Path(explicit).expanduser().resolve())
    elif env.get(ENV_VAR):
        root = named_workspace(Path(env[ENV_VAR]).expanduser().resolve())
    else:
        here = (cwd or Path.cwd()).resolve()
        found = find_workspace_root(here)
        root = found if found is not None else here / WORKSPACE_DIRNAME
    url = database_url or env.get(DATABASE_URL_ENV_VAR) or configured_database_url(root)
    if url:
        from store.db.database_url import check_url

        url = check_url(url)
    return Workspace(root, url or None)


def configured_database_url(root: Path) -> str | None:
    """``database_url`` from the workspace's ``config.toml``, or None.

    Raises:
        InvalidInputError: the file is not valid TOML or the value is not a string.
    """
    from store.workspace.config_file import parse_config_text, read_config_text

    path = root / CONFIG_FILENAME
    text = read_config_text(path)
    if text is None or "database_url" not in text:
        return None
    from store.errors import InvalidInputError

    value = parse_config_text(text, path).get("database_url")
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"{path}: database_url must be a string.")
    return value or None
