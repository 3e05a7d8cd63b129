"""``tether serve`` in a real headless Chromium: load the page, press keys, read what the
dashboard drew, save a screenshot. Chromium is Debian's package; under CI=true a missing
browser fails the test instead of skipping it (``.ci/run`` installs it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store.workspace import Workspace
from tools.browser import Step, chromium_path, drive, served
from tui.serve import announcement, is_loopback, url_for

pytestmark = pytest.mark.browser


def _need_browser() -> None:
    missing = chromium_path() is None
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing = True
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail("Chromium or playwright is missing; .ci/run must install them")
        pytest.skip("Chromium or playwright is not installed (apt-get install chromium)")


def test_serve_binds_localhost_unless_told_and_says_so() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    assert "127.0.0.1 only" in announcement("127.0.0.1", url_for("127.0.0.1", 8000))
    wide = announcement("0.0.0.0", url_for("0.0.0.0", 8000))
    assert "anyone who can reach this port controls the dashboard" in wide
    assert url_for("::1", 80) == "http://[::1]:80"


async def test_dashboard_in_headless_chromium(sample_workspace: Workspace, tmp_path: Path):
    _need_browser()
    shot = tmp_path / "browser.png"
    async with served(sample_workspace.root) as url:
        assert url.startswith("http://127.0.0.1:")
        seen = await drive(url, [
            Step(None, "incident-runbook"),      # the Runs view, with the sample's runs
            Step("3", "Facts"),                   # the Memory view
            Step("4", "ceiling 500000 exceeded"),  # the Handoffs view
            Step("?", "Help — Handoffs"),       # the help overlay of Handoffs
            Step("Escape", "distilled state"),  # help closed: the text it covered is redrawn
            Step("1", "run-incident-1"),
        ], shot)
    assert "run-review-1" in seen[0] and "Quit" in "".join(seen)
    assert "type to filter keys" in seen[3]
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_serve_refuses_a_missing_workspace(tmp_path: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", "serve", "--workspace", str(tmp_path / "none"),
         "--port", "0"], capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1 and "no Tether workspace at" in result.stderr
