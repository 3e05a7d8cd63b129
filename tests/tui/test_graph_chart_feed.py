"""Pure pieces of the round-2 dashboard: the workflow graph's grouping and layout, the run
chart's series, the activity feed's sentences, plurals."""

from __future__ import annotations

import json

from store.model.run_records import CallRecord, NodeRecord
from store.model.token_lanes import CostTotal, TokenUsage
from store.read.dashboard_rows import BucketUsage, NodeUsage
from tui.event_text import event_line, event_summary
from tui.format import plural
from tui.graph_layout import build_graph, combined_state, group_key, move
from tui.screens.tokens_view import totals_text
from tui.widgets.run_chart import (
    axis_ticks,
    call_ticks,
    context_per_call,
    tick_count,
    tokens_per_minute,
)
from tui.widgets.workflow_graph import box_lines, render_graph


def node(node_id: str, state: str = "finished", iteration: int = 0, deps: list[str] | None = None,
         attempts: int = 1) -> NodeRecord:
    return NodeRecord("r", node_id, iteration, state, attempts=attempts,
                   depends_on_json=json.dumps(deps or []))


def usage(node_id: str, tokens: int, iteration: int = 0) -> tuple[str, NodeUsage]:
    return f"{node_id}#{iteration}", NodeUsage(node_id, iteration, calls=1,
                                               tokens=TokenUsage(input=tokens))


def test_fan_out_items_collapse_loops_show_their_iteration_columns_follow_dependencies():
    nodes = [
        node("plan"),
        node("review[api.py]", deps=["plan"]),
        node("review[db.py]", "running", deps=["plan"]),
        node("report", "pending", deps=["review"]),
        node("draft", iteration=0),
        node("draft", "running", iteration=1),
        node("draft", "pending", iteration=2),
    ]
    graph = build_graph(nodes, dict([usage("review[api.py]", 1000), usage("review[db.py]", 500)]))
    assert [[box.key for box in column] for column in graph.columns] == [
        ["plan", "draft"], ["review[…]"], ["report"]]
    review = graph.columns[1][0]
    assert review.is_fan_out and review.done == 1 and len(review.members) == 2
    assert review.state == "running" and review.tokens == 1500
    assert review.focus_member.key == "review[db.py]#0"  # the running item is inspected
    assert review.cost is None  # no usage row carries a cost
    draft = graph.columns[0][1]
    assert draft.is_loop and draft.iteration == 2 and draft.state == "pending"
    assert graph.columns[2][0].depends_on == ("review[…]",)
    assert graph.position_of("review[api.py]#0") == (1, 0)
    assert group_key("review[a[b].py]") == "review[…]"


def test_cost_is_summed_when_the_usage_has_one():
    priced = NodeUsage("a", 0, calls=1, tokens=TokenUsage(input=10), cost=CostTotal(0.25))
    graph = build_graph([node("a"), node("a", iteration=1)],
                        {"a#0": priced, "a#1": priced._replace(iteration=1)})
    assert graph.columns[0][0].cost == 0.5


def test_combined_state_and_cursor_moves():
    assert combined_state(["finished", "skipped"]) == "finished"
    assert combined_state(["finished", "failed", "pending"]) == "failed"
    assert combined_state(["pending", "running"]) == "running"
    assert combined_state([]) == "pending"
    graph = build_graph([node("a"), node("b"), node("c", deps=["a"])])
    assert move(graph, (0, 0), 0, 1) == (0, 1)
    assert move(graph, (0, 1), 1, 0) == (1, 0)  # the nearest row of the next column
    assert move(graph, (1, 0), 1, 0) == (1, 0)  # stays at the edge
    assert move(graph, (0, 0), 0, -1) == (0, 0)


def test_render_graph_draws_boxes_arrows_and_the_cursor():
    graph = build_graph([node("plan"), node("review[x]", "running", deps=["plan"])],
                        dict([usage("plan", 45_000)]))
    lines = [line.plain for line in render_graph(graph, (1, 0))]
    assert "✓ plan" in lines[0] and "45.0k tok" in lines[1] and "finished" in lines[2]
    assert "▶" in lines[1]  # the arrow from plan to review[…]
    assert "┏" in lines[0] and "▶ review[…]" in lines[0]  # the cursor box is heavy
    assert "0/1 done" in lines[2]


def call(call_id: int, at_s: float, context: int, output: int = 100) -> CallRecord:
    return CallRecord(call_id, "r", "n", 0, 1, "agent",
                      tokens=TokenUsage(input=context, output=output),
                      started_at_ms=int(at_s * 1000), context_tokens=context)


def test_tokens_per_minute_bins_by_start_time():
    calls = [call(1, 0, 1000), call(2, 0.5, 1000), call(3, 5.2, 2000)]
    rate = tokens_per_minute(calls)
    assert rate.bin_s == 1  # a short run still shows several bars
    assert len(rate.starts) == 6
    # The tokens of the minute before each point (no extrapolation of the first seconds).
    assert rate.per_minute[0] == 1100 + 1100 and rate.per_minute[5] == 1100 + 1100 + 2100
    long_run = [call(i, i * 60.0, 10) for i in range(30)]  # 29 minutes
    steady = tokens_per_minute(long_run)
    assert steady.bin_s == 60 and set(steady.per_minute) == {110.0}
    assert tokens_per_minute([]).starts == ()
    assert context_per_call(calls) == (1000, 1000, 2000)
    # A turn total (Codex without its rollout file) counts per minute but has no context.
    total = CallRecord(4, "r", "n", 0, 1, "agent", tokens=TokenUsage(input=1_751_428),
                       started_at_ms=5200, context_tokens=1_751_428, kind="reconciliation")
    assert context_per_call([*calls, total]) == (1000, 1000, 2000)
    assert tokens_per_minute([*calls, total]).per_minute[5] == 1100 + 1100 + 2100 + 1_751_428
    # Calls months apart (times an agent CLI reported): the newest bins only.
    far = tokens_per_minute([call(1, 0, 10), call(2, 270 * 86400.0, 20)])
    assert len(far.starts) == 40 and far.bin_s == 3600


def test_axis_and_call_ticks():
    assert axis_ticks(54_098) == ([0.0, 20_000.0, 40_000.0, 60_000.0],
                                  ["0", "20.0k", "40.0k", "60.0k"])
    assert axis_ticks(0) == ([0.0], ["0"])
    # A short plot labels fewer steps, so no two labels share a row.
    assert axis_ticks(54_098, tick_count(11)) == ([0.0, 50_000.0, 100_000.0],
                                                  ["0", "50.0k", "100.0k"])
    assert [tick_count(height) for height in (3, 11, 16, 40)] == [1, 2, 4, 4]
    assert call_ticks(1) == [1]
    ticks = call_ticks(40)
    assert ticks[0] == 1 and ticks[-1] == 40 and len(ticks) <= 8


class Event:
    def __init__(self, kind: str, payload: object, node_id: str | None = None) -> None:
        self.seq, self.at_ms, self.type = 7, 0, kind
        self.run_id, self.node_id, self.iteration, self.attempt = "r-1", node_id, 0, 1
        self.payload_json = json.dumps(payload)


def test_feed_lines_are_sentences_not_json():
    line = event_line(Event("call", {
        "agent": "reviewer", "model": "sim-1", "simulated": True, "context_tokens": 52443,
        "bucket": "50k–100k", "tokens": {"input_tokens": 353, "cache_read_tokens": 46881,
                                         "output_tokens": 273}}, node_id="step"))
    assert line.endswith("Call in step#0, attempt 1 of r-1: 52.4k context (50k–100k) · 353 in "
                         "· 46.9k cache read · 273 out (reviewer/sim-1, simulated).")
    assert "{" not in line
    turn = event_summary("call", json.dumps({
        "agent": "review", "kind": "reconciliation", "context_tokens": 1751428, "bucket": "≥1M",
        "tokens": {"input_tokens": 99460, "cache_read_tokens": 1651968, "output_tokens": 10307}}))
    assert turn.startswith("reconciliation row, not one call (no bucket) · 99.5k in")
    assert "≥1M" not in turn
    assert event_summary("handoff", json.dumps(
        {"to_run_id": "r-2", "trigger": "ceiling", "reason": "too big"})) == (
        "handed off to r-2 (ceiling): too big")
    assert event_summary("memory.block", json.dumps(
        {"bytes_used": 0, "warning": "nothing matched"})) == "got no memory block: nothing matched"
    # the runtime's "no block: " prefix is not said twice, after a note either
    assert event_summary("memory.block", json.dumps(
        {"bytes_used": 0, "warning": "no block: recall is off for this task"})) == (
        "got no memory block: recall is off for this task")
    assert event_summary("memory.block", json.dumps({"bytes_used": 0, "warning": (
        "semantic model loading: recalled by keyword only; no block: nothing in a matched "
        "the query")})) == ("got no memory block: semantic model loading: recalled by keyword "
                            "only; nothing in a matched the query")
    assert event_summary("memory.block", json.dumps(
        {"bytes_used": 900, "budget_bytes": 2048, "items": 3})) == (
        "got a memory block of 900 of 2048 bytes, 3 items")
    assert event_summary("something.new", json.dumps({"a": 1, "b": [1, 2], "c": "x"})) == (
        'something.new: a=1 b=[2] c="x"')
    long = event_line(Event("custom", {"text": "x" * 1000}))
    assert long.endswith("…") and len(long) < 400


def test_every_event_type_the_store_writes_reads_as_one_sentence():
    """Each type the engine and store write (see SUMMARIES) ends in a full stop, starts with
    its subject and holds no JSON, whatever its payload."""
    from tui.event_text import SUMMARIES

    samples = {
        "run.created": ({"workflow": "w", "generation": 2, "parent_run_id": "r-0"}, None),
        "run.status": ({"status": "failed", "error": "boom"}, None),
        "node.state": ({"state": "running"}, "plan"),
        "attempt.started": ({"agent": "sim", "model": "m"}, "plan"),
        "attempt.finished": ({"state": "failed", "tokens": {"input_tokens": 5},
                              "error": "bad"}, "plan"),
        "memory.tool": ({"tool": "recall", "ok": True, "items": [1]}, "plan"),
        "cache.hit": ({}, "plan"),
    }
    for kind in SUMMARIES:
        payload, node = samples.get(kind, ({}, "plan"))
        sentence = event_line(Event(kind, payload, node_id=node)).split("     7  ", 1)[1]
        assert sentence[0].isupper() and sentence.endswith("."), (kind, sentence)
        assert "{" not in sentence and "=" not in sentence, (kind, sentence)
    assert event_line(Event("run.status", {"status": "finished"})).endswith(
        "Run r-1 is now finished.")
    assert event_line(Event("node.state", {"state": "running"}, node_id="plan")).endswith(
        "Node plan#0 of r-1 is now running.")
    assert event_line(Event("attempt.finished", {"state": "failed", "tokens": {},
                                                 "error": "bad"}, node_id="p")).endswith(
        "Attempt 1 of p#0 of r-1 failed with 0 tokens: bad.")
    # a memory tool's call reads as a sentence with a verb
    assert event_line(Event("memory.tool", {"tool": "remember", "ok": True, "note_id": "n1",
                                            "status": "pending"}, node_id="p")).endswith(
        "Node p#0 of r-1 called the memory tool remember: note n1 (pending).")
    assert event_line(Event("memory.tool", {"tool": "recall", "ok": False, "items": [],
                                            "error": "no such bank"}, node_id="p")).endswith(
        "Node p#0 of r-1 called the memory tool recall, which failed: no such bank.")
    assert event_line(Event("memory.block", {"bytes_used": 0, "warning": "no block: recall is "
                                             "off for this task"}, node_id="p")).endswith(
        "Node p#0 of r-1 got no memory block: recall is off for this task.")


def test_plural():
    assert plural(1, "run") == "1 run" and plural(0, "run") == "0 runs"
    assert plural(2, "note proposal") == "2 note proposals"


def test_a_box_without_calls_says_why():
    cached = NodeRecord("r", "plan", 0, "finished", attempts=0, cached=True)
    graph = build_graph([cached, node("draft", "running"), node("check", "skipped")])
    said = {box.key: box_lines(box)[1].plain
            for column in graph.columns for box in column}
    assert said == {"plan": "output from cache", "draft": "no calls yet",
                    "check": "no model calls"}


def test_a_box_whose_attempt_recorded_warnings_shows_it():
    graph = build_graph([node("learn"), node("review")], warned={"learn#0"})
    progress = {box.key: box_lines(box)[2].plain for column in graph.columns for box in column}
    assert progress == {"learn": "⚠ finished", "review": "finished"}


def test_the_lanes_panel_of_turn_totals_alone_shows_their_tokens_and_says_they_are_no_call():
    assert totals_text([]).plain.startswith("No model calls yet.")
    turn = BucketUsage("≥1M", calls=0, tokens=TokenUsage(input=99_460, cache_read=1_651_968))
    said = totals_text([turn]).plain
    assert said.startswith("0 calls · 1.75M tokens\nno model call: these are turn or session")
    assert "fresh input     99.5k" in said and "94% read from cache" in said


async def test_a_chart_read_that_ends_after_the_chart_was_unmounted_shows_nothing() -> None:
    """The Runs view reads the selected run's calls and then shows them; when the dashboard
    quits in between, the chart is gone and must not try to mount its plots (a crash)."""
    from tui.widgets.run_chart import RunChart

    chart = RunChart()
    await chart.show("run-1", [])  # never mounted: no MountError
    assert chart.drawn_run_id is None and not chart.children


def test_a_comparison_of_one_node_iteration_counts_it_in_the_singular():
    from store.model.run_records import RunRecord
    from store.read.compare_reads import Comparison, Pair
    from tui.screens.compare_view import header_text

    one = Comparison(RunRecord("r-a", "w"), RunRecord("r-b", "w"), [Pair("plan#0", None, None)])
    assert "1 of 1 node iteration differs" in header_text(one, 0).plain
    only_a = Comparison(one.a, one.b, [Pair("plan#0", None, None), Pair("x#0", None, None)])
    assert "2 of 2 node iterations differ" in header_text(only_a, 0).plain
