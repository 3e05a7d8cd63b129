"""Ids that become paths: checked at every entry, artifact paths kept inside ``artifacts/``,
every node id its own bounded, readable folder, and artifacts owner-only."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_support import REPO_ROOT, tether

from store.clock import ManualClock
from store.db.backends import open_database
from store.errors import InvalidInputError
from store.model.ids import FOLDER_NAME_CHARS, node_folder_name, validate_node_id, validate_run_id
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.run_control import EngineHost

NASTY_KEYS = [
    "a/b", "a_b", "a:b", "a\\b", "..", ".", ".hidden", "x" * 300, "y" * 5000, "ü-ñ-漢字",
    "a\nb", "a b", "[x]", "a~0123456789abcdef",
]


@pytest.mark.parametrize("bad", ["..", ".", "", "a/b", "../x", "/etc", "r-1\x00", "x" * 65,
                                 ".hidden", "a\nb", "é"])
def test_run_ids_that_could_escape_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        validate_run_id(bad)


def test_node_ids_are_any_text_but_nul_surrogates_or_huge() -> None:
    for good in NASTY_KEYS:
        assert validate_node_id(good) == good
    for bad in ("", "a\x00b", "\ud800", "z" * 20_000):
        with pytest.raises(InvalidInputError):
            validate_node_id(bad)


def test_node_folder_names_are_distinct_bounded_and_readable() -> None:
    names = [node_folder_name(key) for key in NASTY_KEYS]
    assert len(set(names)) == len(NASTY_KEYS)
    for name in names:
        assert 0 < len(name) <= FOLDER_NAME_CHARS
        assert "/" not in name and "\x00" not in name and not name.startswith(".")
        assert name not in (".", "..")
    assert node_folder_name("review[api.py]") == "review[api.py]"  # plain ids stay as they are
    assert node_folder_name("a/b").startswith("a_b~")  # readable prefix, then a hash


async def test_a_run_whose_id_is_dot_dot_never_deletes_the_workspace(
    workspace: Workspace, clock: ManualClock
) -> None:
    async with await open_database(workspace, clock=clock) as db:
        runs = RunStore(db)
        kept = await runs.create_run("kept", status="finished")
        with pytest.raises(InvalidInputError):
            await runs.create_run("evil", run_id="..", status="finished")
    # A row with that id written by something else (an older Tether, a hand edit).
    conn = sqlite3.connect(workspace.database_path)
    conn.execute(
        "INSERT INTO runs (run_id, workflow, status, created_at_ms, updated_at_ms, generation, "
        "nodes_total, nodes_done) VALUES ('..', 'evil', 'finished', 1, 1, 0, 0, 0)"
    )
    conn.commit()
    conn.close()
    outside = workspace.root.parent / "precious.txt"
    outside.write_text("keep me")
    (workspace.artifacts_dir / kept.run_id).mkdir()
    async with await open_database(workspace, clock=clock) as db:
        with pytest.raises(InvalidInputError, match="not a run id"):
            await RunStore(db).delete_run("..")
    host = EngineHost(workspace, clock)  # the dashboard's `d`
    try:
        with pytest.raises(InvalidInputError, match="not a run id"):
            await host.delete("..")
    finally:
        await host.close()
    assert workspace.database_path.exists() and outside.read_text() == "keep me"
    assert (workspace.artifacts_dir / kept.run_id).is_dir()


async def test_deleting_a_run_never_follows_a_link_out_of_artifacts(
    workspace: Workspace, clock: ManualClock, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data.txt").write_text("not Tether's")
    async with await open_database(workspace, clock=clock) as db:
        runs = RunStore(db)
        run = await runs.create_run("w", status="finished")
        (workspace.artifacts_dir / run.run_id).symlink_to(elsewhere, target_is_directory=True)
        with pytest.raises(InvalidInputError, match="not inside"):
            await runs.delete_run(run.run_id)
    assert (elsewhere / "data.txt").read_text() == "not Tether's"


FAN_OUT = """
from engine import AgentResult, Workflow

KEYS = {keys!r}


class Echo:
    name = "echo"
    native_structured_output = False
    simulated = False

    async def run(self, request):
        request.stream("log of " + repr(request.node_id) + "\\n")
        return AgentResult(text="done")


workflow = Workflow("keys", agents={{"echo": Echo()}}, default_agent="echo")
workflow.add_task("each", lambda ctx: "handle " + ctx.item, items=lambda ctx: KEYS,
                  item_key=lambda item: item)
"""


def test_fan_out_keys_get_their_own_log_folders_and_artifacts_are_owner_only(
    tmp_path: Path
) -> None:
    workflow = tmp_path / "keys.py"
    workflow.write_text(textwrap.dedent(FAN_OUT.format(keys=NASTY_KEYS)))
    workspace = tmp_path / "ws"
    env = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run(  # with a permissive umask, as many shells have
        ["sh", "-c", 'umask 000; exec "$@"', "sh", sys.executable, "-m", "tui.cli.entry", "run",
         str(workflow), "--workspace", str(workspace)],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = (workspace / "artifacts").iterdir()
    logs = sorted(run_dir.rglob("stream.log"))
    assert len(logs) == len(NASTY_KEYS)  # one folder per key: no two keys share a log
    seen = set()
    for log in logs:
        (line,) = log.read_text().splitlines()
        seen.add(line)
        assert len(log.parent.parent.name) <= FOLDER_NAME_CHARS
    assert len(seen) == len(NASTY_KEYS)
    for path in [workspace, *workspace.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        wanted = 0o700 if path.is_dir() else 0o600
        assert mode == wanted, (path, oct(mode))
    assert tether(workspace, "runs").returncode == 0
