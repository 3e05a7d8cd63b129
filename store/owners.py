"""Process ownership of runs: an engine process names itself with :func:`new_owner_id`
(``host:pid:random``); :func:`owner_is_dead` tells whether such an owner is gone, so its run can
be resumed or cancelled at once instead of waiting for the heartbeat to go stale.
"""

from __future__ import annotations

import os
import uuid


def new_owner_id() -> str:
    """Identifies the calling process as the owner of the runs it executes:
    ``<host>:<pid>:<random>`` (the format :func:`owner_is_dead` reads)."""
    return f"{_hostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def owner_is_dead(owner_id: str | None) -> bool:
    """True when ``owner_id`` names a process on this host that no longer exists, so its run
    can be resumed at once instead of waiting for the heartbeat to go stale."""
    if not owner_id:
        return True
    host, _, rest = owner_id.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _hostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _hostname() -> str:
    # socket is imported only when an owner is named or checked: `tether runs` never is.
    import socket

    return socket.gethostname()
