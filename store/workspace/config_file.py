"""Reading a workspace's ``config.toml`` without trusting what the path holds.

Every reader of the config (the durability level when the database opens, the engine's
agents and prices, the summarizer's agent) goes through :func:`read_config_text`: a folder, a
FIFO, a device (``/dev/zero``), a socket or anything over 1 MiB is one sentence, never a hang
and never a read without end. The file is opened non-blocking, so a FIFO put in its place
after the check cannot stall the command either.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from store.errors import InvalidInputError

MAX_CONFIG_BYTES = 1024 * 1024


def read_config_text(path: Path) -> str | None:
    """The text of the config at ``path``, or None when there is none.

    Raises:
        InvalidInputError: not a regular file, unreadable, over 1 MiB, or not UTF-8.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None  # no config (or no workspace folder yet): the defaults
    except OSError as error:
        raise InvalidInputError(f"Cannot read {path}: {error.strerror or error}.") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInputError(
                f"{path} is not a regular file; the config must be a TOML file."
            )
        parts: list[bytes] = []
        size = 0
        while size <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - size)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise InvalidInputError(f"Cannot read {path}: {error.strerror or error}.") from None
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:
        raise InvalidInputError(f"{path} is larger than 1 MiB; that is not a config file.")
    try:
        return b"".join(parts).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"{path} is not UTF-8 text; the config must be TOML.") from None


def parse_config_text(text: str, path: Path) -> dict[str, Any]:
    """Parsed TOML of a config read by :func:`read_config_text`.

    Raises:
        InvalidInputError: not valid TOML (or nested too deeply to parse).
    """
    import tomllib  # only when a config is parsed: the hot commands start without it

    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise InvalidInputError(f"{path} is not valid TOML ({reason}).") from None


def read_config(path: Path) -> dict[str, Any]:
    """The parsed config at ``path`` (empty when there is none); see :func:`read_config_text`."""
    text = read_config_text(path)
    return {} if text is None else parse_config_text(text, path)
