"""``tether replay`` as a person runs it (real processes, the counting agent as a subprocess):
the run as of its last event, of event N and of a time, as text and JSON; bad input is one
sentence with nothing written; replaying executes nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from counting_cli import WORKFLOW, tether


def written(workspace: Path) -> tuple[int, int]:
    """(events, data rows) of the workspace, read through SQLite once no process holds it."""
    with sqlite3.connect(f"file:{workspace / 'tether.db'}?mode=ro", uri=True) as conn:
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        rows = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                   for t in ("runs", "nodes", "attempts", "calls", "notes"))
    return events, rows


def plan_end(workspace: Path, run_id: str) -> int:
    """The position of plan's node end among the run's events."""
    with sqlite3.connect(f"file:{workspace / 'tether.db'}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT type, node_id, payload_json FROM events WHERE run_id = ? "
                            "ORDER BY seq", (run_id,)).fetchall()
    return next(i for i, (kind, node, payload) in enumerate(rows, start=1)
                if (kind, node) == ("node.state", "plan") and '"finished"' in payload)


def test_replay_from_the_command_line(tmp_path: Path) -> None:
    workspace, count = tmp_path / "ws", tmp_path / "count.jsonl"
    ran = tether(workspace, count, "run", str(WORKFLOW), "--input", '{"goal": "cli"}',
                 "--format", "json")
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    before, invocations = written(workspace), count.read_text()

    last = tether(workspace, count, "replay", run_id, "--json")
    assert last.returncode == 0, last.stderr
    final = json.loads(last.stdout)
    assert final["position"] == final["events"] and final["run_status"] == "finished"
    assert {n["node_id"]: n["state"] for n in final["nodes"]} == {
        "plan": "finished", "sections[0]": "finished", "sections[1]": "finished",
        "draft": "finished", "review": "finished", "side": "finished"}
    assert final["tokens"]["total"] == 6 * 24  # every call: 20 in, 4 out

    first = json.loads(tether(workspace, count, "replay", run_id, "--at", "1", "--format",
                              "json").stdout)
    assert first["event"]["type"] == "run.created" and first["nodes"] == []
    assert first["tokens"]["total"] == 0
    # Part-way: the first node end, by number and by its time.
    middle = plan_end(workspace, run_id)
    at_end = json.loads(tether(workspace, count, "replay", run_id, "--at", str(middle),
                               "--json").stdout)
    assert {n["node_id"]: n["state"] for n in at_end["nodes"]}["plan"] == "finished"
    assert {n["node_id"]: n["state"] for n in at_end["nodes"]}.get("review") in (None, "pending")
    assert 0 < at_end["tokens"]["total"] < final["tokens"]["total"]
    by_time = json.loads(tether(workspace, count, "replay", run_id, "--at-time",
                                at_end["event"]["at"], "--json").stdout)
    # The cursor goes to the end of the longest run of events stamped at or before the time
    # (events committed together need not be stamped in order), so the next one is later.
    assert by_time["event"]["at_ms"] <= at_end["event"]["at_ms"]
    if by_time["position"] < final["events"]:
        after = json.loads(tether(workspace, count, "replay", run_id, "--at",
                                  str(by_time["position"] + 1), "--json").stdout)
        assert after["event"]["at_ms"] > at_end["event"]["at_ms"]

    text = tether(workspace, count, "replay", run_id, "--at", str(middle))
    assert text.returncode == 0, text.stderr
    assert f"Replay {middle}/{final['events']} · " in text.stdout
    assert "node plan ended: finished" in text.stdout
    assert any(line.split()[:2] == ["finished", "plan"] for line in text.stdout.splitlines())

    cases = [
        (("replay", "r-nosuchrun"), 1, "tether: There is no run 'r-nosuchrun' in this workspace."),
        (("replay", run_id, "--at", "0"), 2,
         f"tether: --at 0 is out of range: the run has {final['events']} events "
         f"(1 to {final['events']})."),
        (("replay", run_id, "--at", str(final["events"] + 1)), 2, "is out of range"),
        (("replay", run_id, "--at-time", "yesterday-ish"), 2, "is not a time"),
        (("replay", run_id, "--at-time", "2001-01-01T00:00:00Z"), 2, "nothing had happened"),
        (("replay", run_id, "--at", "3", "--at-time", "2001-01-01"), 2, "not both"),
    ]
    for args, code, sentence in cases:
        refused = tether(workspace, count, *args)
        assert refused.returncode == code, (args, refused.stderr)
        assert sentence in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stdout == ""
    # Nothing was executed or written by any of it.
    assert written(workspace) == before and count.read_text() == invocations
