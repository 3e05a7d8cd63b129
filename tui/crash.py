"""When the dashboard stops on an internal error: the traceback goes to a file under the
workspace (``crashes/dashboard-<time>-<pid>.log``, owner-only), the terminal gets one sentence
naming it, and the process exits with code 3. Both are masked like everything Tether records
(a traceback may quote a database URL or a token)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from store.model.secret_mask import mask_secrets
from store.workspace.layout import Workspace, make_private_dirs

CRASH_EXIT_CODE = 3
CRASHES_DIRNAME = "crashes"


def write_crash_report(workspace: Workspace, report: str) -> Path:
    """Save ``report`` under the workspace (creating the folder owner-only) and return where."""
    folder = workspace.root / CRASHES_DIRNAME
    make_private_dirs(folder)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = folder / f"dashboard-{stamp}-{os.getpid()}.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(mask_secrets(report) or "")
    return path


def crash_sentence(summary: str, saved: Path | None, problem: str | None = None) -> str:
    """The one sentence printed when the dashboard crashed."""
    where = (
        f"the traceback is in {saved}" if saved is not None
        else f"the traceback could not be saved ({problem})"
    )
    return f"The dashboard stopped on an internal error ({mask_secrets(summary)}); {where}."


def report_crash(workspace: Workspace, report: str) -> int:
    """Save ``report`` (a traceback) under the workspace, name it in one sentence on stderr
    (or say why it could not be saved) and return :data:`CRASH_EXIT_CODE`."""
    summary = report.strip().splitlines()[-1] if report.strip() else "no details"
    try:
        saved: Path | None = write_crash_report(workspace, report)
        unsaved = None
    except OSError as error:
        saved, unsaved = None, error.strerror or str(error)
    print(f"tether: {crash_sentence(summary[:300], saved, unsaved)}", file=sys.stderr)
    return CRASH_EXIT_CODE
