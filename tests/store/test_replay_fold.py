"""The fold behind replay (store/read/replay.py), on event rows made by hand: the moments the
conformance test's store cannot reach cheaply (a resume, a cancel with nobody executing, a log
written before node events carried the attempt count, 20 000 events walked back and forth)."""

from __future__ import annotations

import json
from typing import Any

from store.model.history_records import EventRecord
from store.read.replay import ReplayFold, ReplayLog, is_node_end


def events(*specs: tuple[Any, ...]) -> list[EventRecord]:
    """(type, node or None, payload[, attempt]) -> events of run r, one millisecond apart."""
    out = []
    for seq, spec in enumerate(specs, start=1):
        kind, node, payload, *attempt = spec
        out.append(EventRecord(seq, 1000 + seq, kind, "r", node, 0 if node else None,
                               attempt[0] if attempt else None,
                               None if payload is None else json.dumps(payload)))
    return out


def states(log: ReplayLog, position: int) -> dict[str, str]:
    return {n.node_id: n.state for n in log.at(position).nodes}


def test_a_resume_or_a_claim_puts_running_nodes_back_to_pending() -> None:
    log = ReplayLog(events(
        ("run.created", None, {"status": "running"}),
        ("node.state", "a", {"state": "running", "attempts": 1}),
        ("node.state", "b", {"state": "retrying", "attempts": 1}),
        ("node.state", "c", {"state": "finished", "attempts": 1}),
        ("run.resumed", None, {"abandoned": 1}),
        ("node.state", "a", {"state": "running", "attempts": 2}),
        ("run.cancel-requested", None, None),
        ("run.status", None, {"status": "cancelled"}),
    ))
    assert states(log, 4) == {"a": "running", "b": "retrying", "c": "finished"}
    assert states(log, 5) == {"a": "pending", "b": "pending", "c": "finished"}
    assert {n.node_id: n.attempts for n in log.at(6).nodes} == {"a": 2, "b": 1, "c": 1}
    final = log.at(8)
    assert final.run_status == "cancelled" and states(log, 8)["a"] == "pending"


def test_the_engine_cancelling_its_own_run_leaves_node_states_as_written() -> None:
    log = ReplayLog(events(
        ("node.state", "a", {"state": "running"}),
        ("run.status", None, {"status": "cancelled"}),
    ))
    assert states(log, 2) == {"a": "running"}


def test_an_older_log_counts_attempts_from_their_starts() -> None:
    log = ReplayLog(events(
        ("node.state", "a", {"state": "running"}),
        ("attempt.started", "a", {"agent": "x"}, 1),
        ("node.state", "a", {"state": "retrying"}),
        ("attempt.started", "a", {"agent": "x"}, 2),
    ))
    assert [n.attempts for n in log.at(4).nodes] == [2]


def test_notes_remembered_through_the_tool_and_unknown_events() -> None:
    log = ReplayLog(events(
        ("memory.tool", "a", {"tool": "remember", "ok": True, "note_id": "n1",
                              "status": "pending"}),
        ("memory.tool", "a", {"tool": "remember", "ok": False, "error": "bad"}),
        ("memory.tool", "a", {"tool": "recall", "ok": True, "items": [1]}),
        ("memory.retained", "a", {"note_ids": ["n2"], "status": "accepted"}),
        ("something.new", "a", {"whatever": [1]}),
        ("node.state", "a", "not an object"),
    ))
    state = log.at(6)
    assert [(n.note_id, n.status) for n in state.notes] == [("n1", "pending"), ("n2", "accepted")]
    assert [n.note_id for n in state.pending_notes] == ["n1"]


def test_checkpoints_give_the_same_state_as_folding_from_the_start() -> None:
    specs: list[tuple[Any, ...]] = []
    for i in range(5000):
        node = f"n{i % 7}"
        specs.append(("node.state", node, {"state": "running", "attempts": i // 7 + 1}))
        call = {"tokens": {"input_tokens": i}, "bucket": "<50k", "kind": "model", "cost_usd": None}
        specs.append(("call", node, call, 1))
        specs.append(("node.state", node, {"state": "finished"}))
        specs.append(("heartbeat.noise", None, None))
    all_events = events(*specs)
    log = ReplayLog(all_events)
    for position in (20_000, 7, 12_345, 501, 19_999, 1):  # far forward, back, on, back again
        fold = ReplayFold()
        for event in all_events[:position]:
            fold.apply(event)
        replayed = log.at(position)
        assert {n.key: n.state for n in replayed.nodes} == {
            k: v.state for k, v in fold.nodes.items()}
        assert replayed.run_tokens == fold.run.tokens
    assert len(log._checkpoints) <= ReplayLog.CHECKPOINTS + 1
    assert log.at(20_000).run_tokens.input == sum(range(5000))
    assert log.at(20_000).run_cost.unpriced_calls == 5000
    assert is_node_end(all_events[2]) and not is_node_end(all_events[0])
    assert log.next_end(1, 1) == 3 and log.next_end(3, -1) == 3 and log.next_end(7, -1) == 3
