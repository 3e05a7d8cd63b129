"""``tether run | runs | node | cancel`` as a person runs them: real processes, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from store.workspace.layout import FIRST_WRITE

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fanout_review.py"


def tether(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TETHER_SIM_LATENCY_MS": "5"}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    workspace = tmp_path_factory.mktemp("cli") / "ws"
    result = tether(
        workspace,
        "run",
        str(EXAMPLE),
        "--input",
        '{"files": ["api.py", "db.py"]}',
        "--format",
        "json",
    )
    assert result.returncode == 0, result.stderr
    return workspace, json.loads(result.stdout)


def test_run_shows_progress_and_prints_a_json_summary(finished_run: tuple[Path, dict]) -> None:
    _, run = finished_run
    assert run["status"] == "finished" and run["outcome"] == "finished"
    assert run["nodes_done"] == run["nodes_total"] >= 5
    assert "refine" in run["output"]
    assert run["tokens"]["cache_read_tokens"] > 0


def test_runs_lists_and_filters(finished_run: tuple[Path, dict]) -> None:
    workspace, run = finished_run
    listed = json.loads(tether(workspace, "runs", "--format", "json").stdout)["items"]
    assert [r["run_id"] for r in listed] == [run["run_id"]]
    assert listed[0]["display_status"] == "finished"
    failed = json.loads(tether(workspace, "runs", "--status", "failed", "--format", "json").stdout)
    assert failed == {"items": [], "more": 0}
    text = tether(workspace, "runs").stdout
    assert run["run_id"] in text and "fanout-review" in text
    bad = tether(workspace, "runs", "--status", "bogus")
    assert bad.returncode == 2


def test_node_shows_attempts_calls_buckets_and_output(finished_run: tuple[Path, dict]) -> None:
    workspace, run = finished_run
    data = json.loads(
        tether(
            workspace, "node", "review[api.py]", "--run", run["run_id"], "--format", "json"
        ).stdout
    )
    assert data["state"] == "finished" and data["output"]["file"]
    (attempt,) = data["attempts"]
    (call,) = attempt["calls"]
    assert call["bucket"] in ("<50k", "50k–100k") and call["simulated"] is True
    assert call["context_tokens"] == sum(
        call["tokens"][k] for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens")
    )
    text = tether(workspace, "node", "draft", "--run", run["run_id"], "--attempts").stdout
    assert "Status: finished" in text and "context" in text and "Output:" in text
    missing = tether(workspace, "node", "nope", "--run", run["run_id"])
    assert missing.returncode == 1 and "has no node 'nope'" in missing.stderr
    assert tether(workspace, "node", "plan", "--run", "r-missing").returncode == 1


def test_a_loop_nodes_timeline_shows_its_latest_iteration_as_node_does(
    finished_run: tuple[Path, dict],
) -> None:
    """``tether node draft --run R --timeline`` showed iteration 0 while ``tether node draft``
    (and --iteration's help, "default: latest") shows the latest; an iteration the node never
    had was said to be a node the run does not have at all."""
    workspace, run = finished_run
    shown = json.loads(tether(workspace, "node", "draft", "--run", run["run_id"],
                              "--format", "json").stdout)
    latest = shown["iteration"]
    assert latest > 0, shown  # the example's refinement loop ran more than once
    drawn = json.loads(tether(workspace, "node", "draft", "--run", run["run_id"], "--timeline",
                              "--format", "json").stdout)
    keys = {row["key"] if row["kind"] != "run" else "run" for row in drawn["rows"]}
    keys |= {row.get("node_key") for row in drawn["rows"]} - {None}
    assert f"draft#{latest}" in keys and "draft#0" not in keys, keys
    first = tether(workspace, "node", "draft#0", "--run", run["run_id"], "--timeline").stdout
    bars = [line.split()[0].lstrip("*") for line in first.splitlines() if "draft#" in line
            and not line.startswith("Critical path")]
    assert bars[0] == "draft#0" and f"draft#{latest}" not in bars, first
    for extra in ((), ("--timeline",)):
        missing = tether(workspace, "node", "draft#99", "--run", run["run_id"], *extra)
        assert missing.returncode == 1 and missing.stderr == (
            f"tether: Run {run['run_id']} has no node 'draft' at iteration 99.\n")


def test_an_unknown_node_is_not_found_for_steer_as_for_node(
    finished_run: tuple[Path, dict],
) -> None:
    """``tether steer RUN nope MSG`` exited 2 (invalid input) where ``tether node nope`` exits
    1: the store raised InvalidInputError for a node that does not exist."""
    workspace, run = finished_run
    for extra in ((), ("--next-attempt",)):
        missing = tether(workspace, "steer", run["run_id"], "nope", "hello", *extra)
        assert missing.returncode == 1, missing.stderr
        assert missing.stderr == f"tether: Run {run['run_id']} has no node 'nope' at iteration 0.\n"


def test_bad_input_changes_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    bad_json = tether(workspace, "run", str(EXAMPLE), "--input", "{nope")
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr
    invalid = tether(workspace, "run", str(EXAMPLE), "--input", '{"files": []}')
    assert invalid.returncode == 2 and "invalid at files" in invalid.stderr
    # ... and says what the input takes, on the same line
    assert '; it takes {"files"?: [string], "goal"?: string}.' in invalid.stderr
    assert invalid.stderr.count("\n") == 1
    missing = tether(workspace, "run", str(tmp_path / "none.py"))
    assert missing.returncode == 2
    broken = tmp_path / "broken.py"
    broken.write_text("from engine import Workflow\nworkflow = Workflow('x'\n")
    syntax = tether(workspace, "run", str(broken))
    assert syntax.returncode == 2 and "syntax error at line" in syntax.stderr
    # Nothing was created: the workspace named is still not there (and saying so is an error).
    assert not workspace.exists()
    listing = tether(workspace, "runs", "--format", "json")
    assert (listing.returncode, listing.stdout) == (1, "")
    assert listing.stderr == (
        f"tether: There is no Tether workspace at {workspace}; {FIRST_WRITE}.\n")
    assert tether(workspace, "cancel", "r-nope").returncode == 1


def test_a_misspelt_config_table_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """[budgets] (for [budget]) would leave a run unbudgeted while its user believes it is
    held to one: the run is refused with one sentence naming the typo."""
    workspace = tmp_path / "ws"
    workspace.mkdir(mode=0o700)
    (workspace / "config.toml").write_text("[budgets]\nday_usd = 0.01\n")
    refused = tether(workspace, "run", str(EXAMPLE))
    assert refused.returncode == 2, refused.stderr
    assert "unknown setting 'budgets' (did you mean 'budget'?" in refused.stderr
    assert refused.stderr.count("\n") == 1
    listing = tether(workspace, "runs", "--format", "json")
    assert listing.returncode == 0 and json.loads(listing.stdout)["items"] == []


def test_failed_run_exits_3_resumes_and_shows_data_literally(tmp_path: Path) -> None:
    flag = tmp_path / "fixed"
    workflow = tmp_path / "flaky.py"
    workflow.write_text(
        textwrap.dedent(f"""
        from pathlib import Path
        from engine import AgentError, AgentResult, Workflow

        class Agent:
            name = "flaky"
            native_structured_output = False
            simulated = False

            async def run(self, request):
                if request.node_id == "second" and not Path({str(flag)!r}).exists():
                    raise AgentError("not yet", retryable=False)
                return AgentResult(text="done \\x1b[31mred\\x1b[0m [bold]x[/bold]")

        workflow = Workflow("flaky", agents={{"a": Agent()}}, default_agent="a")
        workflow.add_task("first", "one")
        workflow.add_task("second", "two", depends_on=["first"])
    """)
    )
    workspace = tmp_path / "ws"
    failed = tether(workspace, "run", str(workflow))
    assert failed.returncode == 3 and "not yet" in failed.stderr
    run_id = json.loads(tether(workspace, "runs", "--format", "json").stdout)["items"][0]["run_id"]
    flag.write_text("ok")
    resumed = tether(workspace, "run", str(workflow), "--resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    shown = tether(workspace, "node", "first", "--run", run_id).stdout
    assert "\x1b" not in shown and "[bold]x[/bold]" in shown
    both = tether(workspace, "run", str(workflow), "--resume", run_id, "--input", "{}")
    assert both.returncode == 2


def test_queue_prints_what_it_did_and_the_run_shows_as_queued(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    queued = tether(workspace, "run", str(EXAMPLE), "--queue", "--input",
                    '{"files": ["api.py"]}')
    assert queued.returncode == 0, queued.stderr
    run_id = queued.stdout.strip()
    assert run_id.startswith("r-") and "\n" not in run_id  # stdout: the id alone, for scripts
    # stderr says what happened and what runs it, in one sentence naming the run.
    assert queued.stderr.startswith(f"Queued fanout-review as {run_id};"), queued.stderr
    assert "tether worker" in queued.stderr and queued.stderr.count("\n") == 1
    listed = tether(workspace, "runs")
    assert listed.returncode == 0, listed.stderr
    line = next(row for row in listed.stdout.splitlines() if row.startswith(run_id))
    assert line.split()[2] == "queued", line
    items = json.loads(tether(workspace, "runs", "--format", "json").stdout)["items"]
    assert [(r["run_id"], r["display_status"]) for r in items] == [(run_id, "queued")]
    shown = tether(workspace, "runs", "--where", "status = queued")
    assert run_id in shown.stdout
    # Nothing ran: no attempt, no node finished, and a bad input queues nothing.
    assert items[0]["nodes_done"] == 0 and items[0]["started_at_ms"] is None
    refused = tether(workspace, "run", str(EXAMPLE), "--queue", "--input", '{"files": 3}')
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    after = json.loads(tether(workspace, "runs", "--format", "json").stdout)["items"]
    assert [r["run_id"] for r in after] == [run_id]


def test_a_search_lists_a_run_as_the_plain_listing_does(tmp_path: Path) -> None:
    """``tether runs --where`` reads the same fields as ``tether runs``: the budgets too (the
    search once left them out, so its BUDGET column said '-' for a run at 122% of its ceiling)."""
    workspace = tmp_path / "ws"
    handoff = ROOT / "examples" / "context_handoff.py"
    goal = '{"goal": "migrate the test suite to pytest"}'
    assert tether(workspace, "run", str(handoff), "--input", goal).returncode == 0
    listed = json.loads(tether(workspace, "runs", "--format", "json").stdout)["items"]
    query = ("--where", "workflow = context-handoff")
    found = json.loads(tether(workspace, "runs", *query, "--format", "json").stdout)["items"]
    assert any(run["budgets"] for run in listed)
    # The age is computed at each command's own clock; everything read from the store agrees.
    strip = [{k: v for k, v in run.items() if k != "age_ms"} for run in listed]
    assert [{k: v for k, v in run.items() if k != "age_ms"} for run in found] == strip
    text = tether(workspace, "runs", *query).stdout
    assert "/60.0k" in text, text


SLOW_FLOW = textwrap.dedent("""
    from engine import Workflow
    workflow = Workflow("slow", agents={"sim": {"type": "simulated", "latency_ms": 60000}},
                        default_agent="sim")

    @workflow.task(id="a")
    def a(ctx):
        return "wait"
""")


def _start_slow_run(tmp_path: Path, workspace: Path) -> tuple[subprocess.Popen[str], Path, str]:
    """A real ``tether run`` of a one-node workflow whose call takes a minute, once its first
    attempt has started: the process, the workflow file and the run id."""
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW_FLOW)
    process = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", "run", str(slow), "--workspace", str(workspace)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    assert process.stderr is not None
    seen = [process.stderr.readline()]
    while "attempt 1" not in seen[-1]:
        assert seen[-1], seen  # the run ended before its attempt started
        seen.append(process.stderr.readline())
    return process, slow, seen[0].split()[-1]


def test_ctrl_c_says_how_to_resume_in_one_line_and_exits_130(tmp_path: Path) -> None:
    """Ctrl-C printed "interrupted; resume with: …" and then a second "tether: interrupted."
    (two sentences for one event); the exit code, 130, was not documented."""
    import signal

    process, slow, run_id = _start_slow_run(tmp_path, tmp_path / "ws")
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=60)
    assert process.returncode == 130, rest
    said = [line for line in rest.splitlines() if line.startswith("tether:")]
    assert said == [f"tether: interrupted; resume with: tether run {slow} --resume {run_id}"]
    assert "130" in (ROOT / "docs" / "commands.md").read_text()


def test_a_second_clear_keeps_the_reason_of_the_first(tmp_path: Path) -> None:
    """While the engine had not handed off yet, a second ``tether clear`` (default reason
    "cleared by a person") replaced the reason the first one gave: the handoff recorded the
    wrong reason."""
    workspace = tmp_path / "ws"
    process, _, run_id = _start_slow_run(tmp_path, workspace)
    try:
        for extra in (("--reason", "context too large"), ()):
            asked = tether(workspace, "clear", run_id, *extra)
            assert asked.returncode == 0 and "Clear requested" in asked.stdout, asked.stderr
        (run,) = json.loads(tether(workspace, "runs", "--format", "json").stdout)["items"]
        assert run["clear_reason"] == "context too large"
    finally:
        tether(workspace, "cancel", run_id)
        process.communicate(timeout=60)


@pytest.mark.parametrize(("variable", "value", "accepted"), [
    ("TETHER_MEMORY_TIMEOUT_MS", "abc", "a whole number above 0"),
    ("TETHER_MEMORY_TIMEOUT_MS", "-5", "a whole number above 0"),
    ("TETHER_MEMORY_TIMEOUT_MS", "0", "a whole number above 0"),
    ("TETHER_SIM_LATENCY_MS", "fast", "a number of 0 or more"),
    ("TETHER_SIM_FAILURE_RATE", "2", "a number from 0 to 1"),
    ("TETHER_SIM_SEED", "x", "a whole number"),
])
def test_a_bad_environment_number_is_refused_not_replaced(
    tmp_path: Path, variable: str, value: str, accepted: str
) -> None:
    """``TETHER_MEMORY_TIMEOUT_MS=abc`` (or -5) ran with 2000 ms, and a bad ``TETHER_SIM_*``
    with the simulated agent's default, without a word: a person believed their setting was in
    force. It is now refused in one sentence naming the variable and what it takes; exit 2,
    no run recorded."""
    workspace = tmp_path / "ws"
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", "run", str(EXAMPLE), "--input",
         '{"files": ["a.py"]}', "--workspace", str(workspace)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "TETHER_SIM_LATENCY_MS": "5", variable: value})
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"tether: {variable} must be {accepted}, not {value!r}; unset it for the default."]
    listed = tether(workspace, "runs", "--format", "json")
    assert listed.returncode != 0 or json.loads(listed.stdout)["items"] == []


def test_a_bad_encoder_idle_time_is_refused(tmp_path: Path) -> None:
    """``TETHER_ENCODER_IDLE_S=abc`` ended the encoder service with a Python traceback (and a
    client waited a minute for it); it is now one sentence and exit 2."""
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", "memory", "encoder", "--workspace",
         str(tmp_path / "ws")], capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "TETHER_ENCODER_IDLE_S": "abc"})
    assert done.returncode == 2
    assert done.stderr == ("tether: TETHER_ENCODER_IDLE_S must be a number above 0, not 'abc'; "
                           "unset it for the default.\n")


def test_compare_of_a_loop_node_takes_its_latest_iteration_as_node_does(
    finished_run: tuple[Path, dict]
) -> None:
    """``tether compare A B --node draft`` diffed draft#0, the first iteration, while ``tether
    node draft`` shows the latest: the same name meant two different nodes. It now takes the
    latest iteration in either run, and says which (``draft#N`` names another)."""
    workspace, run = finished_run
    shown = tether(workspace, "node", "draft", "--run", run["run_id"], "--format", "json")
    latest = json.loads(shown.stdout)["iteration"]
    assert latest > 0
    run_id = run["run_id"]
    compared = tether(workspace, "compare", run_id, run_id, "--node", "draft")
    assert compared.returncode == 0, compared.stderr
    assert f"Output of draft#{latest}: the same" in compared.stdout
    as_json = tether(workspace, "compare", run_id, run_id, "--node", "draft", "--format", "json")
    assert json.loads(as_json.stdout)["node"] == f"draft#{latest}"
    first = tether(workspace, "compare", run_id, run_id, "--node", "draft#0")
    assert "Output of draft#0: the same" in first.stdout
    missing = tether(workspace, "compare", run_id, run_id, "--node", "nope")
    assert missing.returncode == 1
    assert missing.stderr == "tether: Neither run has a node 'nope'.\n"


def test_the_timeline_of_a_fan_outs_id_shows_its_copies(finished_run: tuple[Path, dict]) -> None:
    """``tether node review --timeline`` said "Run … has no node 'review'" while ``tether node
    review`` lists the copies the fan-out made; it now shows those copies' timelines (a copy's
    own id shows that copy's, as before)."""
    workspace, run = finished_run
    run_id = run["run_id"]
    listed = tether(workspace, "node", "review", "--run", run_id)
    assert listed.returncode == 0 and "review is a fan-out" in listed.stdout
    shown = tether(workspace, "node", "review", "--run", run_id, "--timeline")
    assert shown.returncode == 0, shown.stderr
    bars = shown.stdout.split("Legend")[0].splitlines()[2:]  # below the header lines
    named = sorted(line.split()[0].lstrip("*") for line in bars if "#" in line.split()[0])
    assert named == ["review[api.py]#0", "review[db.py]#0"], shown.stdout
    assert "review[api.py]#0: waiting" in shown.stdout and "review[db.py]#0: waiting" in (
        shown.stdout)
    one = tether(workspace, "node", "review[db.py]", "--run", run_id, "--timeline")
    assert one.returncode == 0 and "review[db.py]#0:" in one.stdout
    assert "review[api.py]" not in one.stdout.split("Critical path")[0]
    missing = tether(workspace, "node", "revie", "--run", run_id, "--timeline")
    assert missing.returncode == 1
    assert missing.stderr == f"tether: Run {run_id} has no node 'revie'.\n"
