"""A dashboard started by ``tether serve`` (textual-serve's web driver on pipes) ends when the
server's stream ends. It ran on forever before, alone, when the server was killed or stopped
while the dashboard was still starting: ``test_the_dashboard_over_tls`` left such ``tether
tui`` processes behind after the suite on a loaded machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from store.workspace.layout import Workspace

ROOT = Path(__file__).resolve().parents[2]


def test_the_end_of_the_servers_stream_ends_the_dashboard(sample_workspace: Workspace) -> None:
    environment = {**os.environ, "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver",
                   "COLUMNS": "120", "ROWS": "40", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.main", "tui", "--workspace", str(sample_workspace.root)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=environment, cwd=ROOT)
    try:
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline() == b"__GANGLION__\n"  # the web driver is up
        # communicate() closes its input (the server is gone: no quit message, no signal) and
        # reads what it still draws, so it never blocks on a full pipe, until it exits.
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("the dashboard kept running after its input ended") from None
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
