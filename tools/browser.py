"""Driving ``tether serve`` in a real headless Chromium (Debian's ``chromium``, never a
downloaded browser) with Playwright: used by the browser test and by ``python -m
tools.screenshots`` for the browser screenshot.

The page draws the terminal on a canvas, so the text is read where the browser gets it: the
websocket frames carrying the dashboard's terminal output, with escape sequences removed.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
"""Flags for this kind of machine: no background connections to hosts it cannot reach."""

_ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")


def chromium_path() -> str | None:
    """The system Chromium, or None when it is not installed."""
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


def screen_text(stream: bytes) -> str:
    """Terminal output with its escape sequences removed (what was drawn, in order)."""
    return _ESCAPES.sub(b"", stream).decode("utf-8", "replace")


@dataclass(frozen=True)
class Step:
    """Type ``typed`` (if any), press ``key`` (Playwright key name; none for the first load),
    then wait for ``expect``."""

    key: str | None
    expect: str
    typed: str = ""


@asynccontextmanager
async def served(
    workspace: Path, host: str = "127.0.0.1", *, extra: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[str]:
    """Run ``tether serve`` on ``workspace`` (port chosen by the system); yields the address it
    prints first (with its token). ``extra``: more options; ``env``: more variables."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.main", "serve", "--workspace", str(workspace),
         "--host", host, "--port", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert process.stdout is not None
        first = await asyncio.to_thread(process.stdout.readline)
        match = re.search(r"(https?://\S+)", first)
        if match is None:
            rest = await asyncio.to_thread(process.stdout.read)
            raise RuntimeError(f"tether serve did not start: {first}{rest}")
        yield match.group(1)
    finally:
        # The server and the dashboards it started share its session: stop them together.
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)
        if process.stdout is not None:
            process.stdout.close()


async def drive(
    url: str,
    steps: Sequence[Step],
    screenshot: Path,
    *,
    viewport: tuple[int, int] = (1280, 800),
    timeout_s: float = 60.0,
) -> list[str]:
    """Open ``url`` in headless Chromium, do each step (key, then wait until ``expect`` has
    been drawn), save a PNG screenshot; returns the text drawn after each step.

    Raises:
        TimeoutError: an expected text was not drawn in time (the message shows the tail).
    """
    from playwright.async_api import async_playwright

    executable = chromium_path()
    if executable is None:
        raise RuntimeError("Chromium is not installed (Debian: apt-get install chromium).")
    received = bytearray()

    def on_websocket(socket: Any) -> None:
        def on_frame(payload: str | bytes) -> None:
            if isinstance(payload, bytes):
                received.extend(payload)

        socket.on("framereceived", on_frame)

    seen: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tether-chromium-") as profile:
        async with async_playwright() as playwright:
            context = await playwright.chromium.launch_persistent_context(
                profile, executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS),
                viewport={"width": viewport[0], "height": viewport[1]},
            )
            try:
                page = context.pages[0] if context.pages else await context.new_page()
                page.on("websocket", on_websocket)
                await page.goto(url, wait_until="domcontentloaded")
                for step in steps:
                    start = len(received)
                    if step.key is not None or step.typed:
                        # Keys go to the terminal's input element, as a person's typing does.
                        await page.focus("textarea.xterm-helper-textarea")
                        if step.typed:
                            await page.keyboard.type(step.typed)
                        if step.key is not None:
                            await page.keyboard.press(step.key)
                    await _wait_for(received, start, step.expect, timeout_s)
                    await _settled(received, timeout_s)
                    seen.append(screen_text(bytes(received[start:])))
                await page.wait_for_timeout(500)  # let the canvas paint the last frame
                await page.screenshot(path=str(screenshot))
            finally:
                await context.close()
    return seen


QUIET_S = 0.4
"""A screen is settled once no frame has arrived for this long. Keys are sent only to a settled
screen: an escape followed at once by another key reads as alt+key in a terminal."""


async def _settled(received: bytearray, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    size, quiet_since = len(received), loop.time()
    while loop.time() - quiet_since < QUIET_S and loop.time() < deadline:
        await asyncio.sleep(0.05)
        if len(received) != size:
            size, quiet_since = len(received), loop.time()


async def _wait_for(received: bytearray, start: int, expect: str, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while expect not in screen_text(bytes(received[start:])):
        if loop.time() > deadline:
            tail = screen_text(bytes(received[start:]))[-600:]
            raise TimeoutError(f"{expect!r} was not drawn within {timeout_s:.0f} s; got {tail!r}")
        await asyncio.sleep(0.1)


def main(argv: Sequence[str]) -> int:
    """``python -m tools.browser URL EXPECT SCREENSHOT``: open URL, wait until EXPECT is drawn,
    print what was drawn as JSON (used to drive a browser from another network namespace)."""
    import json

    url, expect, screenshot = argv
    seen = asyncio.run(drive(url, [Step(None, expect)], Path(screenshot)))
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
