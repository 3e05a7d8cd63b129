"""Running the real ``tether`` command line in a subprocess, and fingerprinting a workspace."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def tether(
    *args: str | bytes,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tui.cli.entry ARGS`` (what the ``tether`` console script runs) and return
    the finished process (text output).

    ``TETHER_WORKSPACE`` is removed from the environment unless ``env`` sets it, so tests
    never touch a workspace outside their temporary folder.
    """
    environment = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    environment["PYTHONPATH"] = str(REPO_ROOT)
    environment.update(env or {})
    command: Sequence[str | bytes] = [sys.executable, "-m", "tui.cli.entry", *args]
    result = subprocess.run(
        command,
        cwd=cwd,
        env=environment,
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode("utf-8", "replace"),
        result.stderr.decode("utf-8", "replace"),
    )


def fingerprint(folder: Path) -> dict[str, str]:
    """SHA-256 of every file in a workspace folder (database, WAL, artifacts): byte identity."""
    if not folder.exists():
        return {}
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def one_sentence(stderr: str) -> str:
    """Assert ``stderr`` is one ``tether: ...`` line ending a sentence; return the sentence."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tether: "), stderr
    assert lines[0].endswith("."), stderr
    return lines[0].removeprefix("tether: ")
