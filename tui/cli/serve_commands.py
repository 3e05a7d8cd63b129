"""``tether serve``: the dashboard in a browser (textual-serve), on localhost by default, behind
a per-start token, a Host check and an Origin check (:mod:`tui.serve_access`)."""

from __future__ import annotations

import os

import click

from tui.cli.common import workspace_option
from tui.cli.output import fail
from tui.cli.tui_commands import existing_workspace


@click.command("serve")
@workspace_option
@click.option("--host", default=None, metavar="HOST",
              help="Address to listen on (default 127.0.0.1: this machine only); beyond "
              "loopback it needs --tls-cert/--tls-key or a token in TETHER_SERVE_TOKEN.")
@click.option("--port", default=None, type=click.IntRange(0, 65535), metavar="PORT",
              help="Port to listen on (default 8000; 0 lets the system choose).")
@click.option("--public-url", default=None, metavar="URL",
              help="The address browsers use when it is not this server's own (a reverse "
              "proxy): the page's scripts and websocket point there.")
@click.option("--tls-cert", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="Serve over HTTPS with this certificate chain (PEM); needs --tls-key.")
@click.option("--tls-key", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="The private key of --tls-cert (PEM).")
@click.pass_context
def serve_command(
    ctx: click.Context, workspace_dir: str | None, host: str | None, port: int | None,
    public_url: str | None, tls_cert: str | None, tls_key: str | None,
) -> None:
    """Serve the dashboard to a web browser (each tab runs its own live dashboard).

    The address it prints carries a token made for this start (TETHER_SERVE_TOKEN chooses
    one): only a browser that opened it drives the dashboard. It listens on 127.0.0.1 unless
    --host names another address; beyond loopback it needs TLS or a chosen token.
    """
    from tui.serve import DEFAULT_HOST, DEFAULT_PORT, DashboardServer, bind, tls_context
    from tui.serve_access import TOKEN_ENV_VAR, check_token, open_refusal

    workspace = existing_workspace(ctx, workspace_dir)
    chosen_host = host or DEFAULT_HOST
    chosen_port = DEFAULT_PORT if port is None else port
    if (tls_cert is None) != (tls_key is None):
        fail("--tls-cert and --tls-key go together.", 2)
    if public_url is not None and not public_url.startswith(("http://", "https://")):
        fail("--public-url must start with http:// or https://.", 2)
    token = os.environ.get(TOKEN_ENV_VAR) or None
    try:
        if token is not None:
            check_token(token)
        tls = tls_context(tls_cert, tls_key) if tls_cert and tls_key else None
    except ValueError as error:
        fail(f"{error}.", 2)
    refusal = open_refusal(chosen_host, tls=tls is not None, chosen_token=token is not None)
    if refusal is not None:
        fail(refusal, 2)
    try:
        sock = bind(chosen_host, chosen_port)
    except OSError as error:
        fail(f"cannot listen on {chosen_host}:{chosen_port}: {error.strerror or error}.", 3)
    DashboardServer(workspace, sock, chosen_host, token=token, public_url=public_url,
                    tls=tls).serve()


COMMANDS = [serve_command]
