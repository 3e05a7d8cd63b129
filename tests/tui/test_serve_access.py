"""``tether serve`` against what a hostile web page and a remote browser do, with real servers:

* a browser-like websocket client with a foreign ``Origin``, with a rebound ``Host`` (DNS
  rebinding), without the token: refused before any dashboard starts; with the printed
  address's token (then its cookie) and its own Origin: the dashboard's screen arrives;
* ``--host 0.0.0.0`` without TLS or a chosen token is refused; with a self-signed certificate
  the page and websocket work over TLS;
* a real Chromium in another network namespace (a veth pair to this one) opens the dashboard
  served on ``0.0.0.0``: the page points its websocket at the address that browser used.

The namespace test skips with a sentence where ``ip netns`` is not permitted, except under
CI=true, where it fails instead (as the Chromium test does).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from store.workspace.layout import Workspace
from tools.browser import chromium_path, served

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "team-chosen-token-" + secrets.token_hex(8)


def _split(url: str) -> tuple[str, str]:
    base, _, token = url.partition("/?token=")
    return base, token


async def _ws_status(session: aiohttp.ClientSession, url: str, **headers: str) -> int:
    """The websocket handshake's answer: 101 when it was accepted (then a frame is read)."""
    try:
        async with session.ws_connect(url, headers=headers, ssl=False) as ws:
            message = await ws.receive(timeout=60)
            assert message.type == aiohttp.WSMsgType.BINARY  # the dashboard's screen
            return 101
    except aiohttp.WSServerHandshakeError as error:
        return error.status


async def test_a_foreign_page_cannot_drive_the_dashboard(sample_workspace: Workspace) -> None:
    async with served(sample_workspace.root) as url:
        base, token = _split(url)
        port = base.rsplit(":", 1)[1]
        ws = base.replace("http://", "ws://") + "/ws"
        jar = aiohttp.CookieJar(unsafe=True)  # an IP address host keeps its cookies
        async with aiohttp.ClientSession(cookie_jar=jar) as browser:
            async with browser.get(base + "/", allow_redirects=False) as page:
                assert page.status == 403 and "tether serve printed" in await page.text()
            # A page on another site scripting the websocket (no cookie, foreign Origin).
            assert await _ws_status(browser, ws, Origin="http://evil.example") == 403
            async with browser.get(base + "/?token=wrong" + "x" * 20) as page:
                assert page.status == 403
            async with browser.get(url, allow_redirects=False) as page:
                assert page.status == 303 and page.headers["Location"] == "/"
                cookie = page.headers["Set-Cookie"]
                assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            async with browser.get(base + "/") as page:
                assert page.status == 200 and f'"{ws}"' in await page.text()
            # With the cookie, still refused: a foreign Origin, a rebound Host.
            assert await _ws_status(browser, ws, Origin="http://evil.example") == 403
            assert await _ws_status(browser, ws, Origin=f"http://evil.example:{port}",
                                    Host=f"evil.example:{port}") == 421
            assert await _ws_status(browser, ws) == 403  # no Origin at all
            assert await _ws_status(browser, ws, Origin=base) == 101
        async with aiohttp.ClientSession() as stranger:  # the right Origin, no token
            assert await _ws_status(stranger, ws, Origin=base) == 403
    assert token not in url.split("?")[0]


def _serve(workspace: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.main", "serve", "--workspace", str(workspace),
         "--port", "0", *args], capture_output=True, text=True, timeout=60,
        env={**os.environ, **(env or {})})


def test_the_network_needs_tls_or_a_chosen_token(sample_workspace: Workspace) -> None:
    refused = _serve(sample_workspace.root, "--host", "0.0.0.0")
    assert refused.returncode == 2 and "Refusing to serve the dashboard on 0.0.0.0" in (
        refused.stderr)
    short = _serve(sample_workspace.root, "--host", "0.0.0.0", env={"TETHER_SERVE_TOKEN": "ab"})
    assert short.returncode == 2 and "at least 16" in short.stderr
    half = _serve(sample_workspace.root, "--tls-cert", "x.pem")
    assert half.returncode == 2 and "go together" in half.stderr


async def test_the_dashboard_over_tls(sample_workspace: Workspace, tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    async with served(sample_workspace.root,
                      extra=("--tls-cert", str(cert), "--tls-key", str(key))) as url:
        assert url.startswith("https://127.0.0.1:")
        base, _ = _split(url)
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as browser:
            async with browser.get(url, ssl=context, allow_redirects=False) as page:
                assert page.status == 303 and "Secure" in page.headers["Set-Cookie"]
            async with browser.get(base + "/", ssl=context) as page:
                assert 'data-session-websocket-url="wss://' in await page.text()
            wss = base.replace("https://", "wss://") + "/ws"
            assert await _ws_status(browser, wss, Origin=base) == 101


def _netns_unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


@pytest.fixture
def other_host() -> Iterator[tuple[str, str]]:
    """A network namespace joined to this one by a veth pair: (namespace, this side's IP)."""
    if shutil.which("ip") is None:
        _netns_unavailable("the ip command is missing, so no network namespace can be made")
    suffix = secrets.token_hex(3)
    namespace, here, there = f"tether-{suffix}", f"tvh{suffix}", f"tvn{suffix}"
    octet = int(suffix[:2], 16) % 250 + 1
    host_ip, ns_ip = f"10.231.{octet}.1", f"10.231.{octet}.2"
    made = subprocess.run(["ip", "netns", "add", namespace], capture_output=True, text=True)
    if made.returncode != 0:
        _netns_unavailable(f"ip netns is not permitted here ({made.stderr.strip()})")
    try:
        for command in (
            ["ip", "link", "add", here, "type", "veth", "peer", "name", there],
            ["ip", "link", "set", there, "netns", namespace],
            ["ip", "addr", "add", f"{host_ip}/30", "dev", here],
            ["ip", "link", "set", here, "up"],
            ["ip", "netns", "exec", namespace, "ip", "addr", "add", f"{ns_ip}/30", "dev", there],
            ["ip", "netns", "exec", namespace, "ip", "link", "set", there, "up"],
            ["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"],
        ):
            subprocess.run(command, check=True, capture_output=True)
        yield namespace, host_ip
    finally:
        subprocess.run(["ip", "link", "del", here], capture_output=True)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


@pytest.mark.browser
async def test_a_browser_on_another_host_reaches_the_dashboard(
    sample_workspace: Workspace, other_host: tuple[str, str], tmp_path: Path
) -> None:
    if chromium_path() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Chromium is missing; .ci/run must install it")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    namespace, host_ip = other_host
    async with served(sample_workspace.root, "0.0.0.0",
                      env={"TETHER_SERVE_TOKEN": TOKEN}) as url:
        port = _split(url)[0].rsplit(":", 1)[1]
        remote = f"http://{host_ip}:{port}/?token={TOKEN}"
        shot = tmp_path / "remote.png"
        drove = subprocess.run(
            ["ip", "netns", "exec", namespace, sys.executable, "-m", "tools.browser", remote,
             "incident-runbook", str(shot)],
            capture_output=True, text=True, timeout=240, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert drove.returncode == 0, drove.stderr[-2000:]
        [seen] = json.loads(drove.stdout)
        assert "run-review-1" in seen
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # From that host, a page of another origin is still refused.
        probe = subprocess.run(
            ["ip", "netns", "exec", namespace, "curl", "-s", "-o", "/dev/null", "-w",
             "%{http_code}", "-H", "Origin: http://evil.example", "-H", "Connection: Upgrade",
             "-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Version: 13", "-H",
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "-b", f"tether_session={TOKEN}",
             f"http://{host_ip}:{port}/ws"], capture_output=True, text=True, timeout=60)
        assert probe.stdout == "403"
