"""The smaller holes, each with the real command line in a subprocess: a config that is a FIFO
or ``/dev/zero``, a fan-out key with NUL, ``sys.exit()`` in a prompt, a 50 MB prompt, a
read-only workspace folder, another user's workspace, a refused WAL-mode file, control
characters in a clear reason, a read-only PostgreSQL role, and ``tether doctor`` on a team
workspace. Every refusal is one sentence with its exit code; nothing hangs or is left
running."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_support import REPO_ROOT, one_sentence, tether

NUL_KEY = textwrap.dedent('''
    from engine import SimulatedAgent, Workflow
    workflow = Workflow("nulkey", agents={"sim": SimulatedAgent(latency_ms=1)},
                        default_agent="sim")
    workflow.add_task("first", "Do one thing.")
    workflow.add_task("fan", "Review {item}.", depends_on=["first"],
                      items=lambda ctx: ["a\\x00b", "c"], item_key=lambda item: item)
''')
EXITS = textwrap.dedent('''
    import sys
    from engine import SimulatedAgent, Workflow
    workflow = Workflow("exits", agents={"sim": SimulatedAgent(latency_ms=1)},
                        default_agent="sim")
    workflow.add_task("first", "Do one thing.")
    workflow.add_task("second", lambda ctx: sys.exit(0), depends_on=["first"])
''')
ROOT_EXIT = "import sys\nfrom engine import Workflow\nworkflow = Workflow('r')\n" \
            "workflow.add_task('first', lambda ctx: sys.exit(0))\n"
BIG = textwrap.dedent('''
    from engine import SimulatedAgent, Workflow
    workflow = Workflow("big", agents={"sim": SimulatedAgent(latency_ms=1)}, default_agent="sim")
    workflow.add_task("first", lambda ctx: "word " * 10_000_000)
''')
TINY = "from engine import Workflow\nworkflow = Workflow('tiny')\n" \
       "workflow.add_task('only', 'Do it.')\n"


def _runs(workspace: Path) -> list[dict[str, object]]:
    listed = tether(workspace, "runs", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    items: list[dict[str, object]] = json.loads(listed.stdout)["items"]
    return items


def _flow(tmp_path: Path, text: str) -> str:
    path = tmp_path / "flow.py"
    path.write_text(text)
    return str(path)


def _seeded(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    assert tether(workspace, "memory", "set", "workflow:x", "k", "1").returncode == 0
    return workspace


def _unprivileged(*extra: str) -> tuple[str, ...]:
    """Run as root without the capability that ignores file permissions (or skip)."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions would not apply")
    return ("setpriv", *extra, "--bounding-set=-dac_override,-dac_read_search", "--")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_config_that_is_no_file_is_one_sentence_for_every_command(
    tmp_path: Path, kind: str
) -> None:
    workspace = _seeded(tmp_path)
    config = workspace / "config.toml"
    if kind == "fifo":
        os.mkfifo(config)
    else:
        config.symlink_to("/dev/zero")
    for args in (("memory", "get", "workflow:x", "k"), ("runs",), ("memory", "list"),
                 ("doctor",), ("run", _flow(tmp_path, TINY))):
        result = tether(workspace, *args, timeout=60)
        assert result.returncode == 2, (args, result.stderr)
        assert "is not a regular file" in one_sentence(result.stderr)


@pytest.mark.parametrize(("text", "says"), [
    ("this is [not toml\n", "is not valid TOML"),
    ("[budget]\nworkspace_daily_usd = 5\n", "unknown [budget] setting 'workspace_daily_usd'"),
])
def test_doctor_names_a_config_that_tether_run_refuses(
    tmp_path: Path, text: str, says: str
) -> None:
    """``tether doctor`` said every check was ok (exit 0) while ``tether run`` refused the
    workspace's config.toml: the config was not among its checks."""
    workspace = _seeded(tmp_path)
    (workspace / "config.toml").write_text(text)
    refused = tether(workspace, "run", _flow(tmp_path, TINY))
    assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    doctor = tether(workspace, "doctor", "--format", "json")
    assert doctor.returncode == 3, doctor.stdout + doctor.stderr
    findings = {f["check"]: f for f in json.loads(doctor.stdout)["findings"]}
    assert findings["config"]["level"] == "fail" and says in findings["config"]["message"]
    (workspace / "config.toml").write_text("[budget]\nday_usd = 5\n")
    healthy = tether(workspace, "doctor")
    assert healthy.returncode == 0 and "ok    config" in healthy.stdout, healthy.stdout


def _failed_run(tmp_path: Path, flow: str, says: str) -> tuple[Path, dict[str, object]]:
    """Run ``flow``: it must fail (exit 3) saying ``says``, its one run failed, not running."""
    workspace = tmp_path / "ws"
    result = tether(workspace, "run", _flow(tmp_path, flow))
    assert result.returncode == 3 and says in result.stderr, result.stderr
    [run] = _runs(workspace)
    assert run["status"] == "failed"
    return workspace, run


def test_a_fan_out_key_with_nul_fails_the_run(tmp_path: Path) -> None:
    _failed_run(tmp_path, NUL_KEY, "An item key of fan-out 'fan' is unusable")


def test_sys_exit_in_a_prompt_is_reported(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    refused = tether(workspace, "run", _flow(tmp_path, ROOT_EXIT))
    assert refused.returncode == 2
    assert "The prompt of task 'first' called sys.exit(0)" in one_sentence(refused.stderr)
    assert not (workspace / "tether.db").exists()
    _, run = _failed_run(tmp_path, EXITS, "The prompt of second called sys.exit(0)")
    assert run["nodes_done"] == 1


def test_a_50_mb_prompt_fails_its_node_at_once(tmp_path: Path) -> None:
    workspace, _ = _failed_run(
        tmp_path, BIG, "is 50,000,000 bytes; prompts are limited to 8,388,608 bytes")
    assert (workspace / "tether.db").stat().st_size < 5_000_000  # the prompt was not stored


def test_a_read_only_workspace_is_read(tmp_path: Path) -> None:
    workspace = _seeded(tmp_path)
    prefix = _unprivileged()
    os.chmod(workspace / "tether.db", 0o400)
    os.chmod(workspace, 0o500)
    try:
        for args in (("memory", "get", "workflow:x", "k"), ("runs",), ("memory", "list"),
                     ("notes", "list"), ("doctor",)):
            result = tether(workspace, *args, prefix=prefix)
            assert result.returncode == 0, (args, result.stderr)
        refused = tether(workspace, "memory", "set", "workflow:x", "k", "2", prefix=prefix)
        assert refused.returncode == 3 and "read-only" in one_sentence(refused.stderr)
        assert sorted(p.name for p in workspace.iterdir()) == ["artifacts", "tether.db"]
    finally:
        os.chmod(workspace, 0o700)


def test_another_users_workspace_is_one_sentence(tmp_path: Path) -> None:
    workspace = _seeded(tmp_path)
    os.chmod(tmp_path, 0o755)
    prefix = _unprivileged("--reuid=65534", "--regid=65534", "--clear-groups")
    # The other user must be able to run this Tether at all (a virtual environment or checkout
    # inside a folder only root may read cannot be imported by it: .ci/run opens its venv).
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "import click, store, tui"], cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True,
    )
    if probe.returncode != 0:
        pytest.skip("user 65534 cannot read this Python environment or checkout "
                    f"({probe.stderr.strip().splitlines()[-1]})")
    for args in (("memory", "get", "workflow:x", "k"), ("runs",), ("memory", "list"),
                 ("memory", "set", "workflow:x", "k", "2"), ("doctor",)):
        result = tether(workspace, *args, prefix=prefix, cwd=tmp_path)
        assert result.returncode == 3, (args, result.stderr)
        assert "Permission denied for" in one_sentence(result.stderr)
        assert "belongs to root" in result.stderr


def test_a_refused_wal_file_is_left_exactly_as_found(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    conn = sqlite3.connect(workspace / "tether.db")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE mine (a)")
    conn.commit()
    conn.close()
    before = sorted(p.name for p in workspace.iterdir())
    for args in (("runs",), ("memory", "set", "workflow:x", "k", "1"), ("memory", "list"),
                 ("doctor",)):
        result = tether(workspace, *args)
        assert result.returncode in (2, 3), result.stderr
        assert "does not belong to Tether" in result.stderr + result.stdout  # doctor: stdout
        assert sorted(p.name for p in workspace.iterdir()) == before == ["tether.db"]


def test_a_clear_reason_with_control_characters_is_refused(tmp_path: Path) -> None:
    workspace, run = _failed_run(tmp_path, NUL_KEY, "unusable")  # a failed run to clear
    result = tether(workspace, "clear", str(run["run_id"]), "--reason", "bad \x1b[31mred")
    assert result.returncode == 2
    assert "control character U+001B" in one_sentence(result.stderr)
    assert [r["status"] for r in _runs(workspace)] == ["failed"]


@pytest.mark.postgresql
def test_a_read_only_role_gets_one_sentence_and_doctor_reports_the_team_workspace(
    tmp_path: Path,
) -> None:
    import psycopg
    from pg_support import fresh_schema

    reader = os.environ.get("TETHER_TEST_READER_ROLE")
    if not reader:
        pytest.skip("TETHER_TEST_READER_ROLE is not set (.ci/postgres-up sets it)")
    with fresh_schema("ro") as url:
        writer_env = {"TETHER_DATABASE_URL": url}
        assert tether(tmp_path, "memory", "set", "workflow:x", "k", "1",
                      env=writer_env).returncode == 0
        schema = url.split("search_path%3D")[-1]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {reader}')
            conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {reader}')
        user = url.split("://", 1)[1].split("@", 1)[0]
        reader_env = {"TETHER_DATABASE_URL": url.replace(f"://{user}@", f"://{reader}@", 1)}
        assert tether(tmp_path, "memory", "get", "workflow:x", "k",
                      env=reader_env).returncode == 0
        for args in (("memory", "set", "workflow:x", "k", "2"), ("notes", "add", "user:x", "n"),
                     ("memory", "rm", "workflow:x", "k")):
            refused = tether(tmp_path, *args, env=reader_env)
            assert refused.returncode == 3, refused.stderr
            assert "role may only read" in one_sentence(refused.stderr)
        doctor = tether(tmp_path, "doctor", "--format", "json", env=reader_env)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        findings = {f["check"]: f for f in json.loads(doctor.stdout)["findings"]}
        assert findings["database"]["level"] == "ok" and "PostgreSQL" in findings["database"][
            "message"]
        assert findings["role"]["level"] == "warn"
        assert "tether.db" not in doctor.stdout
        assert stat.S_ISDIR(tmp_path.stat().st_mode)


def test_doctor_on_a_workspace_not_made_yet_says_how_it_comes_to_be(tmp_path: Path) -> None:
    """The BRIEF's doctor "says how to recover": a new user's first `tether doctor` names the
    commands whose first write creates the workspace, and following it makes doctor pass."""
    for made in (False, True):
        if made:
            (tmp_path / ".tether").mkdir(mode=0o700)
        doctor = tether(tmp_path, "doctor", "--format", "json")
        assert doctor.returncode == 1, doctor.stdout + doctor.stderr
        [finding] = json.loads(doctor.stdout)["findings"]
        assert finding["level"] == "fail"
        assert "the first write creates it (tether run WORKFLOW, tether notes add" in (
            finding["message"])
    assert tether(tmp_path, "notes", "add", "user:me", "first note").returncode == 0
    assert tether(tmp_path, "doctor").returncode == 0


@pytest.mark.postgresql
def test_doctor_on_an_empty_postgresql_schema_says_how_it_comes_to_be(tmp_path: Path) -> None:
    from pg_support import fresh_schema

    with fresh_schema("empty") as url:
        env = {"TETHER_DATABASE_URL": url}
        doctor = tether(tmp_path, "doctor", env=env)
        assert doctor.returncode == 1, doctor.stdout + doctor.stderr
        assert "the first write creates its tables (tether run WORKFLOW" in doctor.stdout
        assert "tether migrate --to URL" in doctor.stdout
        assert tether(tmp_path, "notes", "add", "user:me", "first note", env=env).returncode == 0
        assert tether(tmp_path, "doctor", env=env).returncode == 0
