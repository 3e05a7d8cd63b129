"""`tether prices` and `tether budget` through the real command line on a real workspace: the
table with its sources, the prices calls used, spend against the day's and each run's
budgets; bad input is one sentence and changes nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from memory_cli_support import tether

from store.db.backends import open_database
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.runs.budget_log import utc_day
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace


def workspace_with_spend(root: Path) -> tuple[Path, str]:
    """A workspace with a run held to a $2 ceiling that spent $1.63 (and a call of a model
    without a price: its dollars read "$1.63+?"), and a $10 daily budget."""
    folder = root / ".tether"

    async def fill() -> str:
        db = await open_database(Workspace(folder))
        try:
            store = RunStore(db)
            run = await store.create_run("review")
            await store.set_run_budget(run.run_id, [
                {"scope": "run", "unit": "usd", "max": 2.0, "on_exceeded": "fail",
                 "source": "ceiling"}])
            await store.record_calls([
                CallUsage(run.run_id, "plan", 0, 1, "claude", TokenUsage(input=1000, output=50),
                          model="claude-opus-4-6[1m]", cost_usd=1.5),
                CallUsage(run.run_id, "plan", 0, 1, "claude", TokenUsage(input=100),
                          model="claude-opus-4-6[1m]", cost_usd=0.13),
                CallUsage(run.run_id, "plan", 0, 1, "local", TokenUsage(input=7),
                          model="made-up-7b"),
            ])
            return run.run_id
        finally:
            await db.close()

    run_id = asyncio.run(fill())
    (folder / "config.toml").write_text(
        '[budget]\nday_usd = 10.0\n\n[prices."local-qwen"]\ninput = 0.2\noutput = 0.6\n'
    )
    return folder, run_id


def test_prices_prints_the_table_with_sources_and_what_calls_used(tmp_path: Path) -> None:
    folder, _ = workspace_with_spend(tmp_path)
    done = tether("prices", "--workspace", str(folder))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[2].startswith("local-qwen") and "config.toml" in lines[2]  # config first
    opus = next(line for line in lines if line.startswith("claude-opus-4-5 "))
    assert opus.split()[1:6] == ["5", "25", "0.5", "6.25", "10"]
    assert "platform.claude.com/docs/en/about-claude/pricing, checked 2026-12-01" in opus
    used = lines[lines.index("Prices this workspace's calls used:") + 2:]
    assert used[0].split()[:4] == ["claude-opus-4-6[1m]", "2", "1.1k", "$1.63"]
    assert used[0].endswith("claude-opus-4-6 (built-in list)")
    assert used[1].split()[:4] == ["made-up-7b", "1", "7", "unknown"]
    assert used[1].endswith("no price: unknown")
    document = json.loads(tether("prices", "--format", "json", "--model", "gpt-5.1-codex",
                                 "--workspace", str(folder)).stdout)
    assert [(p["model"], p["input"], p["output"], p["cache_read"]) for p in document["prices"]
            ] == [("gpt-5.1-codex", 1.25, 10.0, 0.125)]
    assert document["used"] == []


def test_budget_shows_spend_against_the_day_and_each_run(tmp_path: Path) -> None:
    folder, run_id = workspace_with_spend(tmp_path)
    done = tether("budget", "--workspace", str(folder))
    assert done.returncode == 0, done.stderr
    today = json.loads(tether("budget", "--format", "json", "--workspace", str(folder)).stdout)
    day = today["day"]
    assert day == utc_day(_now_ms())
    assert f"The workspace on {day} (UTC): $1.63" in done.stdout
    daily = next(line for line in done.stdout.splitlines() if line.startswith("workspace today"))
    assert "the daily budget ([budget] day_usd)" in daily and "$1.63+? of $10.00" in daily
    assert daily.split()[-2:] == ["16%", "fail"]
    row = next(line for line in done.stdout.splitlines() if line.startswith(run_id))
    assert "the dollar ceiling" in row and "$1.63+? of $2.00" in row and " 81%" in row
    assert today["runs"][0]["budgets"][0]["percent"] == 81
    assert today["day_budgets"][0]["spent"] == 1.63


def test_bad_budget_settings_are_one_sentence(tmp_path: Path) -> None:
    folder, _ = workspace_with_spend(tmp_path)
    (folder / "config.toml").write_text("[budget]\nday_usd = -3\n")
    done = tether("budget", "--workspace", str(folder))
    assert done.returncode == 2
    assert done.stderr.strip().endswith("budget.day_usd must be a number of dollars > 0.")
    assert len(done.stderr.strip().splitlines()) == 1
    (folder / "config.toml").write_text("")
    missing = tether("budget", "--run", "r-000000000000", "--workspace", str(folder))
    assert missing.returncode == 1 and "r-000000000000" in missing.stderr


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000


def test_budget_shows_a_workflows_daily_budget_under_today(tmp_path: Path) -> None:
    folder, run_id = workspace_with_spend(tmp_path)
    today = utc_day(_now_ms())

    async def held_by_the_workflow() -> None:
        db = await open_database(Workspace(folder))
        try:
            await RunStore(db).set_run_budget(run_id, [
                {"scope": "day", "unit": "usd", "max": 4.0, "on_exceeded": "fail",
                 "source": "workflow", "day": today}])
        finally:
            await db.close()

    asyncio.run(held_by_the_workflow())
    done = tether("budget", "--workspace", str(folder))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    own = next(line for line in lines if line.startswith("today, review"))
    assert "the workflow's daily budget (budget day_usd)" in own and "$1.63+? of $4.00" in own
    assert own.split()[-2:] == ["40%", "fail"]
    assert any(line.startswith("workspace today") for line in lines)  # the config's still
    assert "No run is held to a budget." in done.stdout  # the run has no budget of its own


def test_usage_marks_the_daily_budget_the_engine_enforces(tmp_path: Path) -> None:
    """``tether usage`` and the Usage view read the daily budget from ``[budget] day_usd``,
    the key ``tether run`` and ``tether budget`` enforce. They read ``workspace_daily_usd``
    instead (the key the docs gave), which ``tether run`` refuses as an unknown setting, and
    ignored ``day_usd``: a workspace with a daily budget saw no day marked against it."""
    folder, _ = workspace_with_spend(tmp_path)  # [budget] day_usd = 10.0
    shown = tether("usage", "--workspace", str(folder))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].endswith("(daily budget $10.00)"), shown.stdout
    document = json.loads(tether("usage", "--format", "json", "--workspace", str(folder)).stdout)
    assert document["daily_budget_usd"] == 10.0
    spent = tether("budget", "--workspace", str(folder))
    assert "in 3 calls." in spent.stdout.splitlines()[0], spent.stdout
    (folder / "config.toml").write_text("[budget]\nworkspace_daily_usd = 10.0\n")
    refused = tether("budget", "--workspace", str(folder))
    assert refused.returncode == 2 and "unknown [budget] setting" in refused.stderr
    assert "daily budget" not in tether("usage", "--workspace", str(folder)).stdout


def test_one_call_is_said_in_the_singular(tmp_path: Path) -> None:
    folder = tmp_path / ".tether"
    example = Path(__file__).resolve().parents[2] / "examples" / "code_review.py"
    ran = tether("run", str(example), "--input", '{"change": "x"}', "--workspace", str(folder))
    assert ran.returncode == 0, ran.stderr
    line = tether("budget", "--workspace", str(folder)).stdout.splitlines()[0]
    assert line.endswith(" tokens in 1 call."), line


def test_prices_of_one_model_keep_json_alone_and_say_which_calls(tmp_path: Path) -> None:
    """``tether prices --model nope --format json`` printed a sentence before the JSON (stdout
    was no JSON document), and ``--model M`` for a model no call used said the workspace had
    "recorded no calls yet" though it had."""
    folder, _ = workspace_with_spend(tmp_path)
    unknown = tether("prices", "--model", "nope", "--format", "json", "--workspace", str(folder))
    assert unknown.returncode == 0 and json.loads(unknown.stdout) == {"prices": [], "used": []}
    said = tether("prices", "--model", "nope", "--workspace", str(folder)).stdout
    assert said == "nope has no price: its calls are recorded as unknown.\n"
    other = tether("prices", "--model", "gpt-5.1-codex", "--workspace", str(folder)).stdout
    assert other.splitlines()[-1] == "This workspace has recorded no calls of gpt-5.1-codex yet."
