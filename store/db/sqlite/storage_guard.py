"""What every SQLite handle of the workspace shares about storage problems: SQLite's storage
errors (disk full, I/O, corrupt, read-only) become one sentence (:mod:`store.db.storage_errors`,
exit code 3), damage is recorded for every process (:mod:`store.workspace.damage`) and no write is
tried after it, and a handle opened read-only refuses writes with one sentence.

Both :class:`store.db.sqlite.sqlite_database.SqliteDatabase` (asyncio) and
:class:`store.db.sqlite.direct.DirectDatabase` (the short commands of the command line) mix this in.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from store.db.storage_errors import storage_error
from store.errors import DamagedDatabaseError, StorageError
from store.workspace.damage import record_damage
from store.workspace.layout import Workspace


class StorageGuard:
    """Storage-error handling for one open handle of the workspace database."""

    workspace: Workspace
    read_only: bool
    _damage: DamagedDatabaseError | None = None

    @property
    def damage(self) -> DamagedDatabaseError | None:
        """The damage this handle met (no write is attempted after it), or None."""
        return self._damage

    def converted(self, error: BaseException) -> BaseException:
        """``error`` as the one-sentence storage error it stands for (damage recorded), or
        unchanged when it is not a storage problem."""
        if not isinstance(error, sqlite3.Error):
            return error
        problem = storage_error(error, self.workspace.database_path)
        if problem is None:
            return error
        if isinstance(problem, DamagedDatabaseError):
            if self._damage is None:
                self._damage = problem
                record_damage(self.workspace, str(problem))
            return self._damage
        return problem

    @contextlib.contextmanager
    def storage_errors(self) -> Iterator[None]:
        """Turn SQLite's storage errors raised inside the block into one sentence."""
        try:
            yield
        except sqlite3.Error as error:
            problem = self.converted(error)
            if problem is error:
                raise
            raise problem from None

    def check_writable(self) -> None:
        """Refuse a write after damage was met, or on a handle opened read-only."""
        if self._damage is not None:
            raise DamagedDatabaseError(str(self._damage))
        if self.read_only:
            raise StorageError(
                f"{self.workspace.database_path} was opened read-only; this change was not made."
            )
