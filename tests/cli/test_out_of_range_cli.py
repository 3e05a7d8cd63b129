"""Numbers and queries at the edges, as a person types them: one sentence, exit 2, never a
traceback (real processes on a real workspace)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HUGE = "9" * 30


def tether(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TETHER_SIM_LATENCY_MS": "5"}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(workspace)],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A workspace with one finished run of the code-review example; (folder, run id)."""
    folder = tmp_path_factory.mktemp("edges") / "ws"
    done = tether(folder, "run", str(ROOT / "examples" / "code_review.py"),
                  "--input", '{"change": "retry flaky fixtures"}')
    assert done.returncode == 0, done.stderr
    listed = tether(folder, "runs", "--format", "jsonl")
    return folder, listed.stdout.split('"run_id":"')[1].split('"')[0]


def refused(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""
    return result.stderr


@pytest.mark.parametrize("value", [
    f"tokens > {HUGE}", f"age > {HUGE}d", f"created > {'9' * 400}d", f"input.n >= {HUGE}",
    f"gen = {HUGE}", f"tokens > {'9' * 400}",
])
def test_a_query_value_past_64_bits_is_refused(workspace: tuple[Path, str], value: str) -> None:
    """Each crashed with OverflowError as SQLite bound it (exit 1 and a traceback)."""
    assert "takes smaller values than" in refused(tether(workspace[0], "runs", "--where", value))


def test_query_errors_point_into_the_text_as_typed(workspace: tuple[Path, str]) -> None:
    """``--where`` was wrapped in parentheses before parsing: every position was one too far,
    a query ending in AND was said to close a parenthesis never opened, and ``a) OR (b`` was
    accepted, joined with ``--status`` in a way no one wrote."""
    folder = workspace[0]
    assert refused(tether(folder, "runs", "--where", "status = failed)")) == (
        "tether: The query closes a parenthesis at character 16 that was never opened.\n")
    assert "ends where a condition should be" in refused(
        tether(folder, "runs", "--where", "status = failed AND"))
    assert "quote opened at character 1 " in refused(tether(folder, "runs", "--where", '"x'))
    assert "at character 2 that was never opened" in refused(
        tether(folder, "runs", "--where", "x) OR (y", "--status", "finished"))
    assert refused(tether(folder, "runs", "--where", "x) OR (y", "--save", "bad"))
    assert "bad" not in tether(folder, "filters", "list").stdout
    both = tether(folder, "runs", "--where", "gen = 0", "--status", "finished", "--format", "json")
    assert both.returncode == 0 and '"query": "(gen = 0) AND (status = finished)"' in both.stdout


@pytest.mark.parametrize("args", [
    ("usage", "--since", f"{HUGE}d"),
    ("export", "otlp", "--endpoint", "http://127.0.0.1:9", "--since", f"{HUGE}d"),
    ("node", "review", "--run", "{run}", "--offset", HUGE),
    ("node", "review", "--run", "{run}", "--iteration", HUGE),
    ("worker", "--lease-seconds", "1e30"),
    ("mcp", "--bank", "code-review", "--iteration", HUGE),
    ("mcp", "--bank", "code-review", "--attempt", "-1"),
    ("worker", "--lease-seconds", "nan"),
    ("worker", "--poll-seconds", "nan"),
])
def test_options_past_what_a_query_can_bind_are_refused(
    workspace: tuple[Path, str], args: tuple[str, ...],
) -> None:
    """Each crashed with OverflowError (or ValueError for NaN) and a traceback (``tether mcp``:
    at the first remember, which answered the agent with the OverflowError's text; a negative
    attempt was recorded as provenance)."""
    folder, run_id = workspace
    refused(tether(folder, *(arg.replace("{run}", run_id) for arg in args)))


def test_a_node_id_ending_in_a_huge_number_is_a_node_id(workspace: tuple[Path, str]) -> None:
    """``review#N`` names iteration N; past any iteration it is looked up as written."""
    folder, run_id = workspace
    missing = tether(folder, "node", f"review#{HUGE}", "--run", run_id)
    assert missing.returncode == 1 and missing.stderr == (
        f"tether: Run {run_id} has no node 'review#{HUGE}'.\n")


def test_a_limit_that_is_no_number_says_so(workspace: tuple[Path, str]) -> None:
    """click named its range type "integer range": "'abc' is not a valid integer range"."""
    said = refused(tether(workspace[0], "runs", "--limit", "abc"))
    assert said == ("tether: Invalid value for '--limit': 'abc' is not a valid whole number "
                    "(see 'tether runs --help').\n")
