"""The workspace's durability level: how hard a commit is pushed to disk before it is
acknowledged (``durability`` in the ``[workspace]`` table of ``.tether/config.toml``).

Both levels run SQLite in WAL mode; they differ in ``PRAGMA synchronous``:

* ``normal`` (the default, ``synchronous=NORMAL``): a commit is written to the WAL before it is
  acknowledged but not flushed to the disk; it survives the process being killed (``kill -9``,
  a crash), and the database is never corrupted, but a power cut or an operating-system crash
  may lose the last commits (the WAL is flushed at every checkpoint).
* ``full`` (``synchronous=FULL``): every commit is flushed (``fsync``) before it is
  acknowledged, so it also survives a power cut. The engine commits the records of nodes that
  finish together in one transaction (group commit), so the flush is shared.

On a PostgreSQL workspace the same two promises are PostgreSQL's ``synchronous_commit``
(:data:`PG_SYNCHRONOUS_COMMIT`): at ``normal`` (``off``) a commit is acknowledged before the
server flushes its WAL, so a crash of the server (not of a Tether process) can lose the last
commits (up to three times ``wal_writer_delay``) but never corrupts anything; at ``full``
(``on``) the server flushes before acknowledging.
"""

from __future__ import annotations

from pathlib import Path

from store.errors import InvalidInputError

DURABILITY_LEVELS = ("normal", "full")
PG_SYNCHRONOUS_COMMIT = {"normal": "off", "full": "on"}
"""PostgreSQL's ``synchronous_commit`` at each level (set on every session that writes)."""
DEFAULT_DURABILITY = "normal"
SYNCHRONOUS_VALUES = {"normal": 1, "full": 2}
"""What ``PRAGMA synchronous`` reads back as at each level (SQLite: 1 NORMAL, 2 FULL)."""


def check_durability(level: object, source: str = "durability") -> str:
    """``level`` when it is a known durability level; InvalidInputError naming the choices."""
    if isinstance(level, str) and level.lower() in DURABILITY_LEVELS:
        return level.lower()
    raise InvalidInputError(
        f"{source} must be one of {', '.join(DURABILITY_LEVELS)}, not {level!r}."
    )


def durability_from_config(data: dict[str, object], source: str) -> str:
    """The level set in parsed ``config.toml`` data (``[workspace] durability``)."""
    table = data.get("workspace", {})
    if not isinstance(table, dict):
        raise InvalidInputError(f"{source}: [workspace] must be a table.")
    if "durability" not in table:
        return DEFAULT_DURABILITY
    return check_durability(table["durability"], f"{source}: workspace.durability")


def read_durability(config_path: Path) -> str:
    """The durability level of the workspace whose ``config.toml`` is ``config_path``."""
    from store.workspace.config_file import parse_config_text, read_config_text

    text = read_config_text(config_path)
    if text is None or "durability" not in text:
        return DEFAULT_DURABILITY  # most configs only name agents: skip parsing them here
    return durability_from_config(parse_config_text(text, config_path), str(config_path))
