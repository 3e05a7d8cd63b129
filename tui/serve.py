"""``tether serve``: the dashboard in a browser, through textual-serve.

Each browser tab that opens the page starts its own ``tether tui`` process on the workspace
(textual-serve runs it with Textual's web driver and relays the screen over a websocket), so
the browser shows exactly the terminal dashboard, live, with the same keys.

Anyone who can drive the page controls the dashboard, so every request is checked
(:mod:`tui.serve_access`): its ``Host`` names this server, the websocket's ``Origin`` is the
page's own, and it carries this start's token (from the printed address, then a cookie). It
binds 127.0.0.1 unless told otherwise; beyond loopback it takes TLS (``--tls-cert``,
``--tls-key``) or a token chosen in ``TETHER_SERVE_TOKEN``. The page's scripts and websocket
use the address the browser used (or ``--public-url``), so a browser on another machine works.
"""

from __future__ import annotations

import secrets
import shlex
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server

from store.model.secret_mask import register_secret
from store.workspace.layout import Workspace
from tui.serve_access import (
    COOKIE,
    TOKEN_PARAMETER,
    Served,
    addresses,
    host_allowed,
    origin_allowed,
    reach_sentence,
    token_matches,
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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


def new_token() -> str:
    """A secret for one start of the server."""
    return secrets.token_urlsafe(24)


def machine_names() -> tuple[str, ...]:
    """This machine's names, accepted in ``Host`` when listening beyond loopback."""
    names = {socket.gethostname()}
    try:
        names.add(socket.getfqdn())
    except OSError:
        pass
    return tuple(sorted(n for n in names if n))


def _refused(status: int, sentence: str) -> web.Response:
    return web.Response(status=status, text=sentence + "\n", content_type="text/plain")


class DashboardServer(Server):
    """textual-serve's server on a socket bound beforehand (so port 0 works), guarded
    (:mod:`tui.serve_access`), with Tether's own start-up message."""

    def __init__(
        self,
        workspace: Workspace,
        sock: socket.socket,
        host: str,
        *,
        token: str | None = None,
        public_url: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        port = sock.getsockname()[1]
        self.served = Served(
            host, port, "https" if tls is not None else "http", public_url, machine_names()
        )
        self.chosen_token = token is not None
        self.token = token or new_token()
        register_secret(self.token)  # masked wherever it could be recorded
        self.url = addresses(self.served, self.token)[0]
        super().__init__(
            dashboard_command(workspace), host=host, port=port,
            title=f"Tether — {workspace.root.name or workspace.root}", public_url=self.url,
        )
        self._sock = sock
        self._tls = tls

    def announcement(self) -> str:
        """What ``tether serve`` prints on start: where, who can reach it, with what."""
        lines = [f"Serving the Tether dashboard on {self.url}",
                 reach_sentence(self.served, self.chosen_token)]
        others = addresses(self.served, self.token, self.served.names)[1:]
        if others and self.served.bind_host in ("0.0.0.0", "::"):
            lines.append("From other machines: " + " or ".join(others))
        lines.append("Press Ctrl+C to stop.")
        return "\n".join(lines)

    async def on_startup(self, app: web.Application) -> None:
        print(self.announcement(), flush=True)

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._guard)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Host, then token (taken from the printed address into a cookie), then Origin."""
        host = request.headers.get("Host")
        if not host_allowed(self.served, host):
            return _refused(421, "This dashboard answers only to its own address; open the "
                            "address tether serve printed.")
        if request.path.startswith("/static/"):
            return await handler(request)  # textual-serve's scripts and styles: no data
        given = request.query.get(TOKEN_PARAMETER)
        if request.path == "/" and given is not None:
            if not token_matches(self.token, given):
                return _refused(403, "That token is not this dashboard's; open the address "
                                "tether serve printed.")
            response = web.HTTPSeeOther("/")  # the token leaves the address bar
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict",
                                secure=self.served.scheme == "https", path="/")
            return response
        if not token_matches(self.token, request.cookies.get(COOKIE)):
            return _refused(403, "Open the address tether serve printed: it carries the token "
                            "this dashboard asks for.")
        if request.path == "/ws" and not origin_allowed(
            self.served, request.headers.get("Origin"), host
        ):
            return _refused(403, "The dashboard's websocket only answers its own page.")
        return await handler(request)

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        """The page, pointing its scripts and websocket at the address the browser used (or
        ``--public-url``), never at the address the server is bound to."""
        base = (self.served.public_url or
                f"{self.served.scheme}://{request.headers.get('Host', '')}").rstrip("/")
        router = request.app.router
        websocket = ("wss:" if base.startswith("https:") else "ws:") + base.split(":", 1)[1]
        font_size = request.query.get("fontsize", "16")
        return {
            "font_size": int(font_size) if font_size.isdigit() else 16,
            "app_websocket_url": websocket + str(router["websocket"].url_for()),
            "config": {"static": {"url": base + str(router["static"].url_for(filename="/"))
                                  .rstrip("/") + "/"}},
            "application": {"name": self.title},
        }

    def serve(self, debug: bool = False) -> None:
        """Serve until interrupted (Ctrl+C or SIGTERM)."""
        self.debug = debug
        self.initialize_logging()
        run_app: Any = web.run_app
        # No access log: the first request's address carries the token.
        run_app(self._make_app(), sock=self._sock, ssl_context=self._tls, access_log=None,
                print=lambda *_args: None)


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """The server's TLS context from a certificate chain and its key (PEM files).

    Raises:
        ValueError: the files cannot be read or do not match (one sentence).
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        reason = getattr(error, "strerror", None) or getattr(error, "reason", None) or error
        raise ValueError(f"cannot use {cert} and {key} for TLS: {reason}") from None
    return context
