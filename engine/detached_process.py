"""Start a helper process that outlives nothing it depends on: detached from the terminal's
session, its output discarded, and reaped when it exits.

A long-lived process (the dashboard, ``tether mcp``, a worker) starts these on demand (the
shared encoder, a background reindex). Without a wait the exited child stays a zombie under
the parent until its next ``Popen``; a daemon thread waiting on it costs one sleeping thread
while the child runs and nothing after.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Sequence


def start_detached(command: Sequence[str]) -> subprocess.Popen[bytes] | None:
    """Start ``command`` in a new session (stdin, stdout and stderr on /dev/null) and reap it
    in the background when it exits; None when it could not be started."""
    try:
        process = subprocess.Popen(
            list(command), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )
    except OSError:
        return None
    reaper = threading.Thread(target=_reap, args=(process,), name="reap-detached", daemon=True)
    reaper.start()
    return process


def _reap(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        process.wait()
