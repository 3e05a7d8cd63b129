"""Agents never get the engine's secrets, and what they print is recorded masked.

Real processes: ``tether run`` with secrets in its environment starts a command agent (a real
Python program) that dumps the environment it was given and then prints every secret it can
find; an HTTP agent whose base URL carries a password talks to a local server that echoes the
request's ``Authorization`` header in a 401. No secret value is then anywhere in the
workspace: the SQLite file's every row, every artifact, the command line's own output.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from storage_support import one_sentence, tether

from engine.agents.cli.agent_env import agent_environment

DB_PASSWORD = "team-db-pass-0042"
SECRETS = {
    "PGPASSWORD": "pg-password-secret-1",
    "APP_DATABASE_URL": f"postgresql://app:{DB_PASSWORD}@db.example/prod",
    "OPENAI_API_KEY": "sk-proj-abcdefghijklmnopqrstuvwx",
    "MY_SERVICE_TOKEN": "service-token-value-9",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-key-value-7",
}
VALUES = [DB_PASSWORD, *(v for k, v in SECRETS.items() if k != "APP_DATABASE_URL")]

DUMPER = textwrap.dedent('''
    import json, os, sys
    sys.stdin.read()
    with open(sys.argv[1], "w") as out:
        json.dump(dict(os.environ), out)
    # What an agent with a shell tool might print: the environment it sees, and what it can
    # find elsewhere (here: the secrets the test hands it on its command line).
    print("env:", " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())))
    for secret in sys.argv[2:]:
        print("found", secret)
    print("curl -H 'Authorization: Bearer live-bearer-token-5' "
          f"postgresql://app:{sys.argv[2]}@db.example/prod")
    print(json.dumps({"headers": {"Authorization": "Basic dXNlcjpzZWNyZXQ="}}))
''')

WORKFLOW = textwrap.dedent('''
    from engine import Workflow
    workflow = Workflow("secrets", default_agent="dumper")
    workflow.add_task("dump", "Print what you can see.")
''')


def _all_text(workspace: Path) -> str:
    """Every row of the workspace database and every artifact file, as text."""
    conn = sqlite3.connect(f"file:{workspace / 'tether.db'}?mode=ro", uri=True)
    try:
        rows = "\n".join(conn.iterdump())
    finally:
        conn.close()
    files = "\n".join(
        path.read_text("utf-8", "replace")
        for path in (workspace / "artifacts").rglob("*") if path.is_file()
    )
    return rows + "\n" + files


def _configure(workspace: Path, agent: str) -> None:
    workspace.mkdir(mode=0o700, parents=True)
    (workspace / "config.toml").write_text(agent)


def test_a_command_agent_gets_a_short_environment_and_its_output_is_masked(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    script = tmp_path / "dumper.py"
    script.write_text(DUMPER)
    seen = tmp_path / "agent-env.json"
    command = [sys.executable, str(script), str(seen), DB_PASSWORD, *VALUES[1:]]
    _configure(workspace, textwrap.dedent(f'''
        [agents.dumper]
        type = "command"
        preset = "text"
        command = {json.dumps(command)}
        pass_env = ["AWS_*"]
        env = {{ EXTRA_SETTING = "on" }}
    '''))
    flow = tmp_path / "secrets.py"
    flow.write_text(WORKFLOW)
    result = tether(workspace, "run", str(flow),
                    env={**SECRETS, "AWS_PROFILE": "team", "LANG": "C.UTF-8"})
    assert result.returncode == 0, result.stderr
    env = json.loads(seen.read_text())
    for withheld in ("PGPASSWORD", "APP_DATABASE_URL", "OPENAI_API_KEY", "MY_SERVICE_TOKEN",
                     "PYTHONPATH", "TETHER_SIM_LATENCY_MS"):
        assert withheld not in env, withheld
    assert not [name for name in env if name.startswith("PG")]
    for kept in ("PATH", "HOME", "LANG", "AWS_PROFILE", "AWS_SECRET_ACCESS_KEY", "TETHER_RUN_ID"):
        assert kept in env, kept
    assert env["EXTRA_SETTING"] == "on"
    recorded = _all_text(workspace) + result.stdout + result.stderr
    for value in [*VALUES, "live-bearer-token-5", "dXNlcjpzZWNyZXQ="]:
        assert value not in recorded, value
    assert "postgresql://app:***@db.example/prod" in recorded
    assert "Authorization: Bearer ***" in recorded


def test_an_agent_config_naming_the_database_credentials_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    _configure(workspace, textwrap.dedent('''
        [agents.dumper]
        type = "command"
        preset = "text"
        command = ["env"]
        pass_env = ["PGPASSWORD"]
    '''))
    flow = tmp_path / "secrets.py"
    flow.write_text(WORKFLOW)
    result = tether(workspace, "run", str(flow))
    assert result.returncode == 2
    assert "never gets PGPASSWORD" in one_sentence(result.stderr)
    assert not (workspace / "tether.db").exists()


def test_each_preset_gets_what_its_own_cli_reads() -> None:
    environ = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "ANTHROPIC_API_KEY": "a" * 20,
               "OPENAI_API_KEY": "o" * 20, "CODEX_HOME": "/c", "PGPASSFILE": "/p",
               "TETHER_DATABASE_URL": "postgresql://x@y/z", "OTHER_TOKEN": "t" * 20}
    claude = agent_environment(environ, preset="claude-code")
    codex = agent_environment(environ, preset="codex", pass_env=["*"])
    plain = agent_environment(environ, preset="json", env={"PGHOST": "h", "X": "1"})
    assert set(claude) == {"PATH", "HOME", "LC_ALL", "ANTHROPIC_API_KEY"}
    # Even "*" never reaches the database's credentials.
    assert "OPENAI_API_KEY" in codex and "CODEX_HOME" in codex and "OTHER_TOKEN" in codex
    assert "PGPASSFILE" not in codex and "TETHER_DATABASE_URL" not in codex
    assert set(plain) == {"PATH", "HOME", "LC_ALL", "X"}


class _Echo(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that refuses every request, echoing its headers."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"error": {"message": "bad key", "request_headers": {
            "Authorization": self.headers.get("Authorization", "")}}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_agent_error_is_recorded_without_its_credentials(
    tmp_path: Path, echo_server: int
) -> None:
    workspace = tmp_path / "ws"
    _configure(workspace, textwrap.dedent(f'''
        [agents.dumper]
        type = "openai"
        base_url = "http://proxyuser:url-pass-31337@127.0.0.1:{echo_server}/v1"
        model = "m"
        api_key_env = "OPENAI_API_KEY"
        retry = {{ max_retries = 0 }}
    '''))
    flow = tmp_path / "secrets.py"
    flow.write_text(WORKFLOW)
    result = tether(workspace, "run", str(flow), env=SECRETS)
    assert result.returncode == 3, result.stderr
    recorded = _all_text(workspace) + result.stdout + result.stderr
    assert "HTTP 401" in recorded
    for value in ("url-pass-31337", SECRETS["OPENAI_API_KEY"]):
        assert value not in recorded, value
    assert "proxyuser:***@127.0.0.1" in recorded
    # httpx sends the URL's user and password as Basic credentials; the echo is masked.
    assert '"Authorization": "Basic ***"' in recorded
