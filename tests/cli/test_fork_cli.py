"""``tether fork`` as a person runs it (real processes, a real counting agent subprocess): the
fork runs in the foreground, carries what is upstream, shows its origin in ``tether runs`` and
``tether compare``; a refusal exits 2 with one sentence and writes nothing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from counting_cli import WORKFLOW, tether


def test_fork_from_the_command_line(tmp_path: Path) -> None:
    workspace, count = tmp_path / "ws", tmp_path / "count.jsonl"
    ran = tether(workspace, count, "run", str(WORKFLOW), "--input", '{"goal": "cli"}',
                 "--format", "json")
    assert ran.returncode == 0, ran.stderr
    origin = json.loads(ran.stdout)["run_id"]
    (tmp_path / "prompt.txt").write_text("Draft it for beginners", encoding="utf-8")

    refused = tether(workspace, count, "fork", origin, "drat")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "tether: Workflow 'fork-demo' has no task 'drat'; its tasks are: draft, plan, review, "
        "sections, side.")
    assert len(json.loads(tether(workspace, count, "runs", "--format", "json").stdout)
               ["items"]) == 1

    forked = tether(workspace, count, "fork", origin, "draft", "--prompt",
                    f"@{tmp_path / 'prompt.txt'}", "--format", "json")
    assert forked.returncode == 0, forked.stderr
    fork = json.loads(forked.stdout)
    assert fork["outcome"] == "finished" and fork["forked_from"] == origin
    assert "3 node iteration(s) carried over" in forked.stderr
    seen = Counter(json.loads(line)["node"] for line in count.read_text().splitlines())
    assert seen == Counter({"plan": 1, "sections[0]": 1, "sections[1]": 1, "draft": 2,
                            "review": 2, "side": 2})

    listing = tether(workspace, count, "runs").stdout.splitlines()
    row = next(line for line in listing if line.startswith(fork["run_id"]))
    assert f"{origin}:draft" in row.split()
    node = tether(workspace, count, "node", "plan", "--run", fork["run_id"])
    assert f"carried from run {origin}" in node.stdout
    compared = tether(workspace, count, "compare", origin, fork["run_id"])
    assert compared.returncode == 0, compared.stderr
    assert f"{fork['run_id']} is a fork of {origin} from node draft" in compared.stdout
