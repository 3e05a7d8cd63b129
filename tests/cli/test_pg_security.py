"""Security of a PostgreSQL workspace: the password never appears in output, messages or the
process list; TLS options reach libpq unchanged; a dashboard connected with a read-only role
says so and hides every key that writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
from pg_support import fresh_schema
from textual.pilot import Pilot

from store.clock import SYSTEM_CLOCK
from store.database import Database
from store.memory import MemoryStore
from store.runs import RunStore
from store.workspace import DATABASE_URL_ENV_VAR, Workspace
from tests.tui_actions.pilot_support import until
from tui.actions.read_only import WRITE_ACTIONS
from tui.app import TetherApp
from tui.screens.runs_view import RunsScreen

pytestmark = pytest.mark.postgresql

ROOT = Path(__file__).resolve().parents[2]


def _password(url: str) -> str:
    """The test role's password, from PGPASSFILE (where .ci/postgres-up put it)."""
    user = urlsplit(url).username
    passfile = os.environ.get("PGPASSFILE")
    if not passfile:
        pytest.skip("the password test needs the test role's password in PGPASSFILE")
    for line in Path(passfile).read_text().splitlines():
        fields = line.split(":")
        if len(fields) == 5 and fields[3] == user:
            return fields[4]
    pytest.skip(f"no password for {user} in PGPASSFILE")


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}:{quote(password, safe='')}@{parts.hostname}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.fixture
def team(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with fresh_schema("s") as url:
        (tmp_path / ".tether").mkdir(mode=0o700)
        yield url, tmp_path


def tether(cwd: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, DATABASE_URL_ENV_VAR: url}
    env.pop("PGPASSFILE", None)  # the password must come from the URL in the environment
    return subprocess.run([sys.executable, "-m", "tui.cli.entry", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_password_never_in_output_messages_or_process_list(team: tuple[str, Path]) -> None:
    url, cwd = team
    password = _password(url)
    secret_url = _with_password(url, password)
    done = tether(cwd, secret_url, "memory", "set", "workflow:x", "k", '"v"')
    assert done.returncode == 0, done.stderr.replace(password, "***")
    listed = tether(cwd, secret_url, "runs")
    assert listed.returncode == 0
    wrong = secret_url.replace(urlsplit(url).path, "/no_such_database_here")
    failed = tether(cwd, wrong, "runs")
    assert failed.returncode == 3 and "Cannot reach the workspace database" in failed.stderr
    assert ":***@" in failed.stderr
    for result in (done, listed, failed):
        assert password not in result.stdout + result.stderr
    env = {**os.environ, DATABASE_URL_ENV_VAR: secret_url}
    env.pop("PGPASSFILE", None)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", "worker", "--poll-seconds", "0.2"],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _worker_registered(url):
            time.sleep(0.05)
        assert _worker_registered(url)
        cmdline = Path(f"/proc/{worker.pid}/cmdline").read_bytes()
        assert password.encode() not in cmdline
    finally:
        worker.terminate()
        out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err.replace(password, "***")
    assert password not in out + err and "worker " in err


def _worker_registered(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_name = 'workers'").fetchone()
        if not row or not row[0]:
            return False
        found = conn.execute("SELECT count(*) FROM workers WHERE stopped_at_ms IS NULL")
        count = found.fetchone()
        return bool(count and count[0])


def test_tls_options_reach_libpq(team: tuple[str, Path]) -> None:
    url, cwd = team
    separator = "&" if "?" in url else "?"
    done = tether(cwd, f"{url}{separator}sslmode=require", "runs")
    # This test server has TLS off: libpq itself refuses, so the option got through.
    assert done.returncode == 3 and "SSL" in done.stderr


async def test_a_read_only_role_gets_a_dashboard_without_write_keys(
    team: tuple[str, Path],
) -> None:
    url, cwd = team
    reader = os.environ.get("TETHER_TEST_READER_ROLE")
    if not reader:
        pytest.skip("set TETHER_TEST_READER_ROLE (a login role) to test read-only dashboards")
    writer_workspace = Workspace(cwd / ".tether", database_url=url)
    async with await Database.open(writer_workspace) as db:
        await RunStore(db).create_run("code-review", owner_id="elsewhere:1:x")
        await MemoryStore(db).save_note("workflow:x", "a pending note", status="pending")
        schema = db.schema_name  # type: ignore[attr-defined]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {reader}')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {reader}')
    parts = urlsplit(url)
    netloc = f"{reader}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    reader_url = urlunsplit(parts._replace(netloc=netloc))
    app = TetherApp(Workspace(cwd / ".tether", database_url=reader_url), clock=SYSTEM_CLOCK,
                    watch=True, poll_interval=0.1)
    app.animation_level = "none"
    async with app.run_test(size=(150, 40)) as pilot:
        await until(pilot, lambda: app.reader is not None and app.tailer.link_state == "live",
                    "the read-only dashboard listening")
        assert "read-only" in app.status_text().plain
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        await app.refresh_screen(screen)
        await _settle(pilot)
        assert "open_filter" in shown_actions(app)
        assert not (shown_actions(app) & WRITE_ACTIONS)
        app.tailer.reader.read_only = False  # type: ignore[union-attr]  # as for a writer
        screen.refresh_bindings()
        await _settle(pilot)
        assert "launch_run" in shown_actions(app)
        app.tailer.reader.read_only = True  # type: ignore[union-attr]
        await pilot.press("3")
        await _settle(pilot)
        assert "search_notes" in shown_actions(app)
        assert not (shown_actions(app) & WRITE_ACTIONS)


def shown_actions(app: TetherApp) -> set[str]:
    """The actions the footer offers right now."""
    return {
        active.binding.action for active in app.screen.active_bindings.values()
        if active.enabled
    }


async def _settle(pilot: Pilot[None]) -> None:
    await pilot.pause()
    await pilot.pause(0.05)
