"""The environment an agent CLI starts with: a short allow-list, never Tether's secrets.

An agent CLI (Claude Code, Codex, any program) runs tools of its own, a shell among them, and
what it prints is stored in the workspace a team shares. So it does not inherit the engine's
environment. It gets (pure policy, :func:`agent_environment`):

* what any program needs to run: ``PATH``, ``HOME``, the user's name and shell, the terminal,
  the locale (``LANG``, ``LC_*``), ``TZ``, the temporary folder, the XDG folders, the TLS
  certificate settings and the proxies;
* what its own CLI reads, when it is set: Claude Code's ``ANTHROPIC_API_KEY``,
  ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``, ``CLAUDE_CONFIG_DIR`` ...; Codex's
  ``CODEX_HOME``, ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` (:data:`PRESET_VARIABLES`);
* what the agent's config names: ``pass_env`` (names or shell-style patterns such as
  ``AWS_*``, taken from Tether's environment) and ``env`` (values);
* Tether's own description of the attempt (``TETHER_RUN_ID``, ``TETHER_NODE_ID`` ...).

Never the workspace database's credentials: ``TETHER_DATABASE_URL`` and every libpq variable
(``PG*``: ``PGPASSWORD``, ``PGPASSFILE`` ...) are left out whatever a pattern matches, and an
agent config that names one explicitly is refused with one sentence.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

BASE_VARIABLES = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ",
    "TMPDIR", "TMP", "TEMP", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
    "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy",
    "https_proxy", "no_proxy", "all_proxy", "TETHER_WORKSPACE",
)
BASE_PREFIXES = ("LC_",)

PRESET_VARIABLES: dict[str, tuple[str, ...]] = {
    "claude-code": (
        "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_CUSTOM_HEADERS", "CLAUDE_CONFIG_DIR",
        "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
    ),
    "codex": ("CODEX_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID"),
    "json": (),
    "text": (),
}
"""Variables each preset's CLI reads, passed when they are set (documented in docs/agents.md)."""


def is_withheld(name: str) -> bool:
    """True for a variable no agent ever gets: the workspace database's URL and libpq's
    settings and secrets (``PG*``)."""
    return name == "TETHER_DATABASE_URL" or name.startswith("PG")


def check_agent_variables(pass_env: Iterable[str], env: Mapping[str, str]) -> None:
    """Refuse an agent config that names a withheld variable (see :func:`is_withheld`).

    Raises:
        ValueError: one sentence naming the variable (the agent registry reports it as the
            agent config's error).
    """
    for name in [*pass_env, *env]:
        if not isinstance(name, str) or not name:
            raise ValueError("pass_env and env name environment variables (non-empty text)")
        if is_withheld(name):
            raise ValueError(
                f"an agent never gets {name}: agents run with their own environment, without "
                "the workspace database's credentials"
            )


def agent_environment(
    environ: Mapping[str, str],
    *,
    preset: str,
    pass_env: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    tether: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment one agent CLI starts with (see the module docstring)."""
    patterns = list(pass_env)
    wanted = set(BASE_VARIABLES) | set(PRESET_VARIABLES.get(preset, ()))
    chosen = {
        name: value
        for name, value in environ.items()
        if not is_withheld(name)
        and (
            name in wanted
            or name.startswith(BASE_PREFIXES)
            or any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
        )
    }
    chosen.update({k: v for k, v in (env or {}).items() if not is_withheld(k)})
    chosen.update(tether or {})
    return chosen
