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
    assert "3 node iterations carried over" in forked.stderr
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
    lines = {line[2:30].strip(): line for line in compared.stdout.splitlines()[2:]}
    assert lines["plan#0"].startswith("↳") and lines["sections[0]#0"].startswith("↳")
    assert lines["draft#0"][0] == " " and lines["review#0"][0] == " "  # ran anew: not carried
    as_json = json.loads(tether(workspace, count, "compare", origin, fork["run_id"],
                                "--format", "json").stdout)
    flags = {n["node"]: (n["carried"], n["differs"]) for n in as_json["nodes"]}
    assert flags["plan#0"] == (True, False) and flags["draft#0"][0] is False

    # A fork of the fork, with an edited memory block: the chain shows all three.
    (tmp_path / "block.txt").write_text("Remember: the readers are new.", encoding="utf-8")
    again = tether(workspace, count, "fork", fork["run_id"], "review", "--memory-block",
                   f"@{tmp_path / 'block.txt'}", "--format", "json")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)["run_id"]
    seen = Counter(json.loads(line)["node"] for line in count.read_text().splitlines())
    assert seen["draft"] == 2 and seen["review"] == 3  # draft carried, review ran once more
    node = tether(workspace, count, "node", "review", "--run", second)
    assert "| Remember: the readers are new." in node.stdout
    assert f"edited in the fork of {fork['run_id']}" in node.stdout
    chain = tether(workspace, count, "runs", "--forks", second)
    assert chain.returncode == 0, chain.stderr
    assert chain.stdout.splitlines() == [
        f"Fork chain of {second}: 3 runs",
        f"  {origin}  finished    first run",
        f"  └─ {fork['run_id']}  finished    from draft · prompt · 3 carried",
        f"*    └─ {second}  finished    from review · memory block · 4 carried",
    ]
    chain_doc = json.loads(tether(workspace, count, "runs", "--forks", origin,
                                  "--format", "json").stdout)
    assert [(c["run_id"], c["depth"], c["fork_node"], c["edit"]) for c in chain_doc["chain"]] \
        == [(origin, 0, None, None), (fork["run_id"], 1, "draft", "prompt"),
            (second, 2, "review", "memory block")]
    items = {r["run_id"]: r for r in json.loads(
        tether(workspace, count, "runs", "--format", "json").stdout)["items"]}
    assert (items[second]["forked_from"], items[second]["fork_node"]) == (fork["run_id"],
                                                                          "review")
    assert items[second]["fork"]["memory_block"] == "Remember: the readers are new."
    assert items[origin]["forked_from"] is None
    missing = tether(workspace, count, "runs", "--forks", "r-000000000000")
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1


def test_a_fork_from_one_fan_out_copy_edits_that_copy_only(tmp_path: Path) -> None:
    """``tether fork RUN 'sections[1]' --prompt …`` gave the edited prompt to every copy of
    the fan-out: ``sections[0]`` wrote section 1 too, and section 0 was never written. The
    edit now reaches the copy named; its siblings run anew with their own prompts."""
    workspace, count = tmp_path / "ws", tmp_path / "count.jsonl"
    ran = tether(workspace, count, "run", str(WORKFLOW), "--input", '{"goal": "copies"}',
                 "--format", "json")
    assert ran.returncode == 0, ran.stderr
    origin = json.loads(ran.stdout)["run_id"]
    count.write_text("")
    forked = tether(workspace, count, "fork", origin, "sections[1]", "--prompt",
                    "Write the body section twice as long")
    assert forked.returncode == 0, forked.stderr
    assert f"Forked {origin} from sections[1] as " in forked.stderr
    prompts = {}
    for line in count.read_text().splitlines():
        seen = json.loads(line)
        prompts[seen["node"]] = seen["prompt"].split("\n")[0]
    assert prompts["sections[1]"] == "Write the body section twice as long"
    assert prompts["sections[0]"] == "Write the intro section"
