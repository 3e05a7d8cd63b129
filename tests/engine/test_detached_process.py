"""A helper started detached (the shared encoder, a background reindex) is reaped by the
long-lived process that started it once it exits: no zombie is left under the dashboard."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from engine.detached_process import start_detached


def test_an_exited_helper_leaves_no_zombie(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    process = start_detached([sys.executable, "-c",
                              f"import os; open({str(marker)!r}, 'w').write(str(os.getsid(0)))"])
    assert process is not None
    for reaper in [t for t in threading.enumerate() if t.name == "reap-detached"]:
        reaper.join(60)
    assert process.returncode == 0
    assert not Path(f"/proc/{process.pid}").exists()  # reaped, not <defunct>
    assert int(marker.read_text()) == process.pid != os.getsid(0)  # its own session


def test_a_command_that_cannot_start_is_none(tmp_path: Path) -> None:
    assert start_detached([str(tmp_path / "no-such-program")]) is None
