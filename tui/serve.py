"""``tether serve``: the dashboard in a browser, through textual-serve.

Each browser tab that opens the page starts its own ``tether tui`` process on the workspace
(textual-serve runs it with Textual's web driver and relays the screen over a websocket), so
the browser shows exactly the terminal dashboard, live, with the same keys.

The server binds 127.0.0.1 unless told otherwise: anyone who can reach the port controls the
dashboard (launching, cancelling and clearing runs, editing memory), and there is no login.
"""

from __future__ import annotations

import ipaddress
import shlex
import socket
import sys
from typing import Any

from aiohttp import web
from textual_serve.server import Server

from store.workspace.layout import Workspace

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def dashboard_command(workspace: Workspace) -> str:
    """The shell command textual-serve runs for each browser tab (this Python, this Tether)."""
    return " ".join(
        shlex.quote(part)
        for part in (sys.executable, "-m", "tui.cli.main", "tui", "--workspace",
                     str(workspace.root))
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (``port`` 0 lets the system choose).

    Raises:
        OSError: the address is in use or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def url_for(host: str, port: int) -> str:
    """The address a browser opens (IPv6 hosts in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def announcement(host: str, url: str) -> str:
    """What ``tether serve`` prints on start: where, and who can reach it."""
    if is_loopback(host):
        reach = (f"Listening on {host} only (this machine); use --host 0.0.0.0 to open it to "
                 "the network.")
    else:
        reach = (f"Listening on {host}: anyone who can reach this port controls the dashboard "
                 "(there is no login).")
    return f"Serving the Tether dashboard on {url}\n{reach}\nPress Ctrl+C to stop."


class DashboardServer(Server):
    """textual-serve's server on a socket bound beforehand (so port 0 works and the page's
    websocket address names the real port), with Tether's own start-up message."""

    def __init__(self, workspace: Workspace, sock: socket.socket, host: str) -> None:
        port = sock.getsockname()[1]
        self.url = url_for(host, port)
        super().__init__(
            dashboard_command(workspace), host=host, port=port,
            title=f"Tether — {workspace.root.name or workspace.root}", public_url=self.url,
        )
        self._sock = sock
        self._bound_host = host

    async def on_startup(self, app: web.Application) -> None:
        print(announcement(self._bound_host, self.url), flush=True)

    def serve(self, debug: bool = False) -> None:
        """Serve until interrupted (Ctrl+C or SIGTERM)."""
        self.debug = debug
        self.initialize_logging()
        run_app: Any = web.run_app
        run_app(self._make_app(), sock=self._sock, print=lambda *_args: None)
