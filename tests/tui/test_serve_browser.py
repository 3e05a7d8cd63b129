"""``tether serve`` in a real headless Chromium: load the page, press keys, read what the
dashboard drew, save a screenshot. Chromium is Debian's package; under CI=true a missing
browser fails the test instead of skipping it (``.ci/run`` installs it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store.workspace.layout import Workspace
from tools.browser import Step, chromium_path, drive, served
from tui.serve_access import (
    Served,
    addresses,
    host_allowed,
    is_loopback,
    open_refusal,
    origin_allowed,
    reach_sentence,
    token_matches,
)

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
    local = Served("127.0.0.1", 8000)
    assert "127.0.0.1 only" in reach_sentence(local, False)
    wide = reach_sentence(Served("0.0.0.0", 8000), True)
    assert "plain HTTP" in wide and "TETHER_SERVE_TOKEN" in wide
    assert addresses(Served("::1", 80), "t") == ["http://[::1]:80/?token=t"]
    assert addresses(Served("0.0.0.0", 80, names=("box",)), "t", ["box"]) == [
        "http://127.0.0.1:80/?token=t", "http://box:80/?token=t"]
    assert open_refusal("0.0.0.0", tls=False, chosen_token=False)
    assert open_refusal("0.0.0.0", tls=True, chosen_token=False) is None
    assert open_refusal("127.0.0.1", tls=False, chosen_token=False) is None


def test_hosts_and_origins_that_may_drive_the_dashboard() -> None:
    local = Served("127.0.0.1", 8000)
    assert host_allowed(local, "127.0.0.1:8000") and host_allowed(local, "localhost:8000")
    assert host_allowed(local, "[::1]:8000")
    for refused in ("evil.example:8000", "127.0.0.1:9999", "10.0.0.2:8000", "", None):
        assert not host_allowed(local, refused), refused  # DNS rebinding names another host
    wide = Served("0.0.0.0", 8000, names=("box",))
    assert host_allowed(wide, "10.0.0.2:8000") and host_allowed(wide, "box:8000")
    assert not host_allowed(wide, "evil.example:8000")
    proxied = Served("127.0.0.1", 8000, public_url="https://dash.example.com")
    assert host_allowed(proxied, "dash.example.com")
    assert host_allowed(proxied, "dash.example.com:443")
    assert origin_allowed(local, "http://127.0.0.1:8000", "127.0.0.1:8000")
    assert not origin_allowed(local, "http://evil.example", "127.0.0.1:8000")
    assert not origin_allowed(local, None, "127.0.0.1:8000")
    assert not origin_allowed(local, "https://127.0.0.1:8000", "127.0.0.1:8000")
    assert origin_allowed(proxied, "https://dash.example.com", "dash.example.com")
    assert token_matches("secret-token", "secret-token")
    assert not token_matches("secret-token", "secret-tokeX") and not token_matches("s", None)


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
