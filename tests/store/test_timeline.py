"""A run's timeline as a pure function of its records: what each node was doing when, the
critical path, idle time, attempts and retry waits, calls and tool calls in time, and the
tool calls real agent-CLI logs show."""

from __future__ import annotations

from pathlib import Path

from engine.agents.cli.tool_log import logged_tools
from store.model.run_records import AttemptRecord, CallRecord, NodeRecord, RunRecord
from store.read.timeline import (
    LoggedTool,
    NodeDetail,
    Span,
    ToolCall,
    build_timeline,
    flatten,
    place_logged_tools,
    visible_node_keys,
    with_details,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
T = 1_000_000


def node(node_id: str, started: int | None, finished: int | None, *, deps: str = "[]",
         state: str = "finished", attempts: int = 1, iteration: int = 0,
         cached: bool = False) -> NodeRecord:
    return NodeRecord("r", node_id, iteration, state, attempts, cached, deps, None, None,
                      None if started is None else T + started,
                      None if finished is None else T + finished, 0)


def attempt(node_id: str, number: int, started: int, finished: int | None,
            state: str = "finished") -> AttemptRecord:
    return AttemptRecord("r", node_id, 0, number, state, agent="sim", started_at_ms=T + started,
                         finished_at_ms=None if finished is None else T + finished)


def run(status: str = "finished", finished: int | None = 1000) -> RunRecord:
    return RunRecord("r", "w", status=status, created_at_ms=T, started_at_ms=T,
                     finished_at_ms=None if finished is None else T + finished)


DAG = [
    node("plan", 0, 100),
    node("a", 150, 300, deps='["plan"]'),
    node("b", 120, 700, deps='["plan"]', attempts=2),
    node("sum", 750, 900, deps='["a", "b"]'),
    node("old", None, 50, attempts=0),  # carried over, never ran here
]


def test_each_node_waits_then_queues_then_runs_and_the_critical_path_is_the_last_chain() -> None:
    timeline = build_timeline(run(), DAG, now_ms=T + 5000)
    bars = {bar.node.node_id: bar for bar in timeline.bars}
    assert bars["plan"].spans == (Span(T, T + 100, "finished"),)
    assert bars["a"].spans == (
        Span(T, T + 100, "waiting"), Span(T + 100, T + 150, "queued"),
        Span(T + 150, T + 300, "finished"),
    )
    assert bars["sum"].ready_ms == T + 700  # b finished last of its dependencies
    assert bars["old"].spans == (Span(T + 50, T + 50, "carried"),)
    assert timeline.critical_path == ["plan#0", "b#0", "sum#0"]
    # Nothing ran from 100 to 120, from 700 to 750 and after 900: 170 ms idle of 1000.
    assert [(s.start_ms - T, (s.end_ms or 0) - T) for s in timeline.idle] == [
        (100, 120), (700, 750), (900, 1000)
    ]
    assert (timeline.idle_ms, timeline.busy_ms) == (170, 830)


def test_attempts_replace_the_active_part_with_each_try_and_the_retry_wait() -> None:
    timeline = build_timeline(run(), DAG, now_ms=T + 5000)
    calls = (CallRecord(7, "r", "b", 0, 2, "sim", started_at_ms=T + 500,
                        finished_at_ms=T + 690),)
    tools = (ToolCall("b#0", 2, T + 600, T + 600, "recall"),)
    detail = NodeDetail((attempt("b", 1, 120, 300, "failed"), attempt("b", 2, 450, 700)),
                        calls, tools)
    rows = flatten(with_details(timeline, {"b#0": detail}), {"b#0"})
    keys = [row.key for row in rows]
    assert keys[:4] == ["run", "plan#0", "a#0", "b#0"]
    assert keys[4:8] == ["b#0/1", "b#0/2", "b#0/2/c7", "b#0/2/t0"]
    b = rows[3]
    assert [s.kind for s in b.spans] == ["waiting", "queued", "failed", "retrying", "finished"]
    assert b.spans[3] == Span(T + 300, T + 450, "retrying")
    assert rows[6].spans == (Span(T + 500, T + 690, "call"),) and rows[6].depth == 2
    assert rows[7].label == "tool recall" and rows[7].depth == 2
    assert rows[0].kind == "run" and [s.kind for s in rows[0].spans] == [
        "busy", "idle", "busy", "idle", "busy", "idle"
    ]
    assert visible_node_keys(rows, 3, 3) == ["b#0"]


def test_a_live_run_goes_on_until_now() -> None:
    nodes = [node("plan", 0, 100), node("work", 200, None, state="running", deps='["plan"]'),
             node("next", None, None, state="pending", deps='["work"]', attempts=0)]
    timeline = build_timeline(run("running", None), nodes, now_ms=T + 900)
    assert timeline.live and timeline.end_ms == T + 900
    bars = {bar.node.node_id: bar for bar in timeline.bars}
    assert bars["work"].spans[-1] == Span(T + 200, None, "running")
    assert bars["next"].spans == (Span(T, None, "waiting"),)
    assert timeline.critical_path == ["plan#0", "work#0"]
    assert timeline.idle == (Span(T + 100, T + 200, "idle"),)  # "work" runs until now


def test_fan_out_copies_and_loop_iterations_are_dependencies() -> None:
    nodes = [node("review[a]", 0, 100), node("review[b]", 0, 300),
             node("report", 310, 400, deps='["review"]'),
             node("draft", 400, 500), node("draft", 520, 600, iteration=1)]
    timeline = build_timeline(run(finished=600), nodes, now_ms=T + 5000)
    bars = {bar.node.key: bar for bar in timeline.bars}
    assert bars["report#0"].ready_ms == T + 300
    assert bars["draft#1"].spans[0] == Span(T, T + 500, "waiting")
    assert timeline.critical_path == ["draft#0", "draft#1"]


def test_logged_tool_calls_sit_after_the_call_that_asked_for_them() -> None:
    calls = [
        CallRecord(1, "r", "n", 0, 1, "cc", started_at_ms=T, finished_at_ms=T + 100,
                   detail_json='{"message_id": "m1"}'),
        CallRecord(2, "r", "n", 0, 1, "cc", started_at_ms=T + 400, finished_at_ms=T + 500,
                   detail_json='{"message_id": "m2"}'),
    ]
    logged = [LoggedTool("Read", True, "a.py", "m1", 0), LoggedTool("Bash", False, "ls", "m1", 1),
              LoggedTool("Edit", True, "", None, 2)]
    placed = place_logged_tools("n#0", attempt("n", 1, 0, 600), calls, logged, T + 9999)
    assert [(t.name, t.start_ms - T, t.end_ms - T, t.ok) for t in placed] == [
        ("Edit", 0, 600, True), ("Read", 100, 250, True), ("Bash", 250, 400, False),
    ]
    assert not any(t.exact for t in placed)


def test_real_agent_cli_logs_show_their_tool_calls() -> None:
    claude = logged_tools((FIXTURES / "claude-code" / "B_vecsum_stream.jsonl").open())
    assert claude and all(t.message_id for t in claude)
    assert {t.name for t in claude} >= {"Read"}
    codex = logged_tools((FIXTURES / "codex" / "C5_agentcmd_stream5.jsonl").open())
    assert [(t.name, t.ok, t.detail) for t in codex] == [("shell", True, "zsh -lc ls")]
    cancelled = logged_tools((FIXTURES / "codex" / "C10_mcp_call_cancelled.jsonl").open())
    assert [(t.name, t.ok, t.detail) for t in cancelled] == [
        ("tether.remember", False, "user cancelled MCP tool call")
    ]
    assert logged_tools(["not json", "[1]", '{"type": "assistant", "message": 3}']) == []
