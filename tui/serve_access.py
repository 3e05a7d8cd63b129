"""Who may drive ``tether serve``: the pure rules, tested directly.

The served dashboard is the whole dashboard (launch, cancel, clear, edit memory), so a web page
must never drive it. Every request passes three checks:

* **Host** (:func:`host_allowed`): the ``Host`` header names this server: a loopback address or
  ``localhost`` when it listens on loopback; otherwise an IP address, this machine's name or the
  ``--public-url`` host, always with the served port. A page on another name (DNS rebinding:
  ``evil.example`` resolving to 127.0.0.1) is refused.
* **Origin** (:func:`origin_allowed`): the websocket's ``Origin`` is the page's own (same scheme,
  host and port as the request, or the public URL's). A browser always sends it; a script on
  another site cannot forge it.
* **Token** (:func:`token_matches`): a secret made at each start (or ``TETHER_SERVE_TOKEN``),
  carried by the address ``tether serve`` prints (``/?token=...``), then kept in an HttpOnly,
  SameSite=Strict cookie. Without it there is no page and no websocket.

Listening beyond loopback over plain HTTP sends that token over the network in clear, so it is
refused unless TLS is configured or the token was chosen on purpose (:func:`open_refusal`).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

COOKIE = "tether_session"
TOKEN_PARAMETER = "token"
TOKEN_ENV_VAR = "TETHER_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def split_host(header: str) -> tuple[str, int | None]:
    """``Host`` header value as (host, port): ``[::1]:8000`` -> (``::1``, 8000)."""
    value = header.strip().lower()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        host, _, port_text = value.partition(":")
    else:
        host, port_text = value, ""
    try:
        return host, int(port_text) if port_text else None
    except ValueError:
        return host, -1


@dataclass(frozen=True)
class Served:
    """Where this server listens and how it is reached."""

    bind_host: str
    port: int
    scheme: str = "http"
    public_url: str | None = None
    names: tuple[str, ...] = ()
    """This machine's own names (hostname, FQDN), accepted in ``Host`` off loopback."""

    @property
    def public(self) -> tuple[str, str, int] | None:
        """(scheme, host, port) of ``--public-url``, when given."""
        if not self.public_url:
            return None
        parts = urlsplit(self.public_url)
        default = 443 if parts.scheme == "https" else 80
        return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def host_allowed(served: Served, header: str | None) -> bool:
    """True when the request's ``Host`` names this server (see the module docstring)."""
    if not header:
        return False
    host, port = split_host(header)
    public = served.public
    if public is not None and host == public[1] and port in (public[2], None):
        return True
    if port != served.port:
        return False
    if is_loopback(served.bind_host):
        return is_loopback(host)
    return _is_ip(host) or host == "localhost" or host in {n.lower() for n in served.names}


def origin_allowed(served: Served, origin: str | None, host_header: str | None) -> bool:
    """True when ``Origin`` is the page's own: this request's scheme and host, or the public
    URL's origin."""
    if not origin or not host_header:
        return False
    wanted = {f"{served.scheme}://{host_header.strip().lower()}"}
    public = served.public
    if public is not None:
        parts = urlsplit(served.public_url or "")
        wanted.add(f"{parts.scheme}://{parts.netloc}".lower())
    return origin.strip().lower().rstrip("/") in wanted


def token_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison of a presented token with this server's."""
    return bool(given) and hmac.compare_digest(expected.encode(), (given or "").encode())


def open_refusal(bind_host: str, *, tls: bool, chosen_token: bool) -> str | None:
    """Why listening on ``bind_host`` is refused, or None: beyond loopback, plain HTTP would
    carry the token over the network in clear, so it takes TLS or a token chosen on purpose."""
    if is_loopback(bind_host) or tls or chosen_token:
        return None
    return (
        f"Refusing to serve the dashboard on {bind_host} over plain HTTP with a token made for "
        "this start: anyone on the network could read it. Give --tls-cert and --tls-key, or "
        f"choose a token in {TOKEN_ENV_VAR} (at least {MIN_TOKEN_CHARS} characters) if this "
        "network is trusted."
    )


def check_token(token: str) -> str:
    """A chosen token, checked: long enough to guess no faster than the made one."""
    if len(token) < MIN_TOKEN_CHARS or not token.isprintable() or " " in token:
        raise ValueError(
            f"{TOKEN_ENV_VAR} must be at least {MIN_TOKEN_CHARS} printable characters without "
            "spaces."
        )
    return token


def reach_sentence(served: Served, chosen_token: bool) -> str:
    """The banner's second line: who can reach the dashboard, and with what."""
    if is_loopback(served.bind_host):
        return (
            f"Listening on {served.bind_host} only (this machine). The address above carries "
            "this start's token: whoever has it controls the dashboard, so keep it private."
        )
    secured = ("over TLS" if served.scheme == "https"
               else "over plain HTTP (the network can read it)")
    token = f"the token in {TOKEN_ENV_VAR}" if chosen_token else "the token in the address"
    return (
        f"Listening on {served.bind_host}, {secured}: anyone who can reach this port and has "
        f"{token} controls the dashboard."
    )


def addresses(served: Served, token: str, extra_hosts: Iterable[str] = ()) -> list[str]:
    """The addresses to print, each carrying the token: the public URL when given, else this
    machine's (loopback first, then ``extra_hosts`` for other machines)."""
    query = f"/?{TOKEN_PARAMETER}={token}"
    if served.public_url:
        return [served.public_url.rstrip("/") + query]
    hosts = [served.bind_host] if served.bind_host not in ("0.0.0.0", "::") else ["127.0.0.1"]
    hosts += [h for h in extra_hosts if h not in hosts]
    return [f"{served.scheme}://{_bracketed(h)}:{served.port}{query}" for h in hosts]


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
