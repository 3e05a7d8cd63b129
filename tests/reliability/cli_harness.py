"""Running the real ``tether`` entry point (``tui.cli.entry.main``, what the console script
calls) inside the test process.

The argument vector, standard streams, working directory and environment are swapped for the
call, exactly as a fresh process would see them (arguments that are not UTF-8 arrive as
surrogate escapes, as Python decodes ``argv`` at start-up); stdin may be an endless stream.
Hundreds of invocations then cost seconds instead of minutes of interpreter start-ups; a few
cases are also run as real subprocesses to show both agree.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tui.cli.entry import main


@dataclass(frozen=True)
class Outcome:
    """What one invocation did."""

    code: int
    stdout: str
    stderr: str


class EndlessZeros(io.RawIOBase):
    """A stdin that never ends (``yes``-style): reading it all would never finish."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer)
        view[:] = b"0" * len(view)
        return len(view)


@contextlib.contextmanager
def _swapped(cwd: Path, env: Mapping[str, str | None]) -> Iterator[None]:
    old_cwd = Path.cwd()
    old_env = {key: os.environ.get(key) for key in env}
    os.chdir(cwd)
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        os.chdir(old_cwd)
        for key, value in old_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_cli(
    args: list[str],
    *,
    cwd: Path,
    stdin: bytes | BinaryIO = b"",
    env: Mapping[str, str | None] | None = None,
) -> Outcome:
    """Call ``main()`` with ``tether ARGS``; returns the exit code and the text written."""
    raw = io.BytesIO(stdin) if isinstance(stdin, bytes) else stdin
    out, err = io.BytesIO(), io.BytesIO()
    streams = (sys.argv, sys.stdin, sys.stdout, sys.stderr)
    wrappers = (
        io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8"),  # type: ignore[arg-type]
        io.TextIOWrapper(out, encoding="utf-8", errors="backslashreplace"),
        io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace"),
    )
    sys.argv = ["tether", *args]
    sys.stdin, sys.stdout, sys.stderr = wrappers
    code = 0
    try:
        with _swapped(cwd, {"TETHER_WORKSPACE": None, **(env or {})}):
            main(fast_exit=False)  # the process is pytest's: never os._exit it
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv, sys.stdin, sys.stdout, sys.stderr = streams
        for wrapper in wrappers:
            wrapper.flush()
            wrapper.detach()  # keep the buffers open when the wrappers go away
    return Outcome(code, out.getvalue().decode("utf-8", "replace"),
                   err.getvalue().decode("utf-8", "replace"))


def argv_text(raw: bytes) -> str:
    """An argument as Python's start-up decodes bytes that are not UTF-8 (surrogate escapes)."""
    return os.fsdecode(raw)
