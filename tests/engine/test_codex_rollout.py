"""Codex's model requests one by one, from a real rollout file (tests/fixtures/agents/codex/
R1_rollout_28_requests.jsonl: 28 requests in one turn of gpt-5.3-codex, 1,766,028 tokens, each
count written twice): the pure counter, the file reader (plain, growing, zstd), the lookup by
thread id, and the Codex session reader with and without a rollout."""

from __future__ import annotations

import json
import os
from pathlib import Path

import zstandard

from engine.agents.cli.codex import CodexSession
from engine.agents.cli.codex_rollout import (
    RequestCounter,
    RolloutFile,
    codex_usage,
    find_rollout,
    last_total,
    parse_line,
)
from store.model.buckets import bucket_for
from store.model.token_lanes import TokenUsage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "codex"
ROLLOUT = FIXTURES / "R1_rollout_28_requests.jsonl"
EXEC = FIXTURES / "R1_exec_28_requests.jsonl"
THREAD = "019c8a4d-8f45-7010-8b5d-7fad920aa6f9"
NAME = f"rollout-2026-02-23T12-41-04-{THREAD}.jsonl"
# The turn's figures as turn.completed reports them (the rollout's last running total).
TURN = TokenUsage(input=1751428 - 1651968, cache_read=1651968, output=14600 - 4293, reasoning=4293)
FEB_23 = 1771846864.0  # 2026-02-23T11:41:04Z, when the session started


def requests_of(lines: list[str], counter: RequestCounter | None = None) -> list:
    counter = counter or RequestCounter()
    found = [counter.feed(parse_line(line)) for line in lines]
    return [r for r in found if r is not None]


def test_each_request_is_the_growth_of_the_running_total_counted_once() -> None:
    counter = RequestCounter()
    requests = requests_of(ROLLOUT.read_text().splitlines(), counter)
    assert len(requests) == 28
    # 56 token_count lines: 27 exact repeats and one rate-limit-only ("info": null) add nothing.
    assert counter.skipped == 28 and counter.shrunk == 0
    assert sum((r.usage for r in requests), TokenUsage()) == TURN
    assert {r.model for r in requests} == {"gpt-5.3-codex"}
    assert {r.context_window for r in requests} == {258400}
    # The last request is exactly the last count's own request (last_token_usage).
    assert requests[-1].raw == {
        "input_tokens": 108869, "cached_input_tokens": 108288, "cache_write_input_tokens": 0,
        "output_tokens": 6189, "reasoning_output_tokens": 2283,
    }  # fmt: skip
    # As one turn it is a ≥1M "call"; request by request every context fits the 258k window.
    assert bucket_for(TURN.context_tokens) == "≥1M"
    assert max(r.usage.context_tokens for r in requests) <= 258400
    assert {bucket_for(r.usage.context_tokens) for r in requests} <= {
        "<50k", "50k–100k", "100k–200k",
    }  # fmt: skip
    assert all(r.finished_ms and r.started_ms and r.started_ms <= r.finished_ms for r in requests)


def test_synthetic_and_recomputed_counts_add_no_request() -> None:
    lines = [
        '{"type":"turn_context","payload":{"model":"gpt-5.5"}}',
        '{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":'
        '{"input_tokens":100,"output_tokens":10}}}}',
        # fill_to_context_window: a total with no input/output split.
        '{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":'
        '{"total_tokens":272000}}}}',
        '{"type":"event_msg","payload":{"type":"token_count","info":null}}',
        # A total below the one reached (recomputed, or an earlier invocation's) is skipped.
        '{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":'
        '{"input_tokens":60,"output_tokens":10}}}}',
        '{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":'
        '{"input_tokens":130,"output_tokens":15}}}}',
        "not json",
    ]
    counter = RequestCounter()
    requests = requests_of(lines, counter)
    assert [r.usage for r in requests] == [
        TokenUsage(input=100, output=10),
        TokenUsage(input=30, output=5),
    ]
    assert counter.shrunk == 1 and counter.skipped == 2 and requests[0].model == "gpt-5.5"


def test_a_growing_file_yields_complete_lines_only(tmp_path: Path) -> None:
    lines = ROLLOUT.read_bytes().splitlines(keepends=True)
    path = tmp_path / NAME
    path.write_bytes(b"".join(lines[:100]) + lines[100][:50])  # a line half written
    reader, counter = RolloutFile(path), RequestCounter()
    first = requests_of(reader.new_lines(), counter)
    with open(path, "ab") as handle:
        handle.write(lines[100][50:] + b"".join(lines[101:]))
    rest = requests_of(reader.new_lines(), counter)
    assert len(first) + len(rest) == 28 and first and rest
    assert reader.new_lines() == [] and reader.rest() == []


def test_a_rollout_compressed_while_it_is_read_counts_each_request_once(tmp_path: Path) -> None:
    lines = ROLLOUT.read_bytes().splitlines(keepends=True)
    path = tmp_path / NAME
    path.write_bytes(b"".join(lines[:150]))
    reader, counter = RolloutFile(path), RequestCounter()
    first = requests_of(reader.new_lines(), counter)
    # Codex replaces the plain file with its compressed sibling.
    packed = zstandard.ZstdCompressor().compress(ROLLOUT.read_bytes())
    (tmp_path / (NAME + ".zst")).write_bytes(packed)
    os.remove(path)
    rest = requests_of(reader.rest(), counter)
    assert first and len(first) + len(rest) == 28


def test_a_compressed_rollout_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / (NAME + ".zst")
    path.write_bytes(zstandard.ZstdCompressor().compress(ROLLOUT.read_bytes()))
    assert len(requests_of(RolloutFile(path).rest())) == 28
    broken = tmp_path / "broken.jsonl.zst"
    broken.write_bytes(b"not zstd at all")
    try:
        RolloutFile(broken).rest()
    except OSError as error:
        assert "not a valid zstd file" in str(error)
    else:
        raise AssertionError("a broken .zst file must be an OSError")


def _home_with_rollout(tmp_path: Path, compressed: bool = False, day: str = "2026/02/23") -> Path:
    home = tmp_path / "codex-home"
    folder = home / "sessions" / day
    folder.mkdir(parents=True)
    data = ROLLOUT.read_bytes()
    if compressed:
        (folder / (NAME + ".zst")).write_bytes(zstandard.ZstdCompressor().compress(data))
    else:
        (folder / NAME).write_bytes(data)
    return home


def test_the_rollout_is_found_by_thread_id_plain_before_compressed(tmp_path: Path) -> None:
    home = _home_with_rollout(tmp_path)
    plain = home / "sessions/2026/02/23" / NAME
    assert find_rollout(home, THREAD, FEB_23) == plain
    (plain.parent / (NAME + ".zst")).write_bytes(b"")
    assert find_rollout(home, THREAD, FEB_23) == plain
    # Started on another day (a resumed thread): every dated folder is searched.
    assert find_rollout(home, THREAD, FEB_23 + 40 * 86400) == plain
    os.remove(plain)
    assert find_rollout(home, THREAD, FEB_23) == plain.parent / (NAME + ".zst")
    assert find_rollout(home, "00000000-0000-0000-0000-000000000000", FEB_23) is None
    assert find_rollout(home, "../../etc", FEB_23) is None


def _session(home: Path | None, **options: object) -> tuple[CodexSession, list, object]:
    session = CodexSession(home=home, started_s=FEB_23, **options)  # type: ignore[arg-type]
    live = []
    for line in EXEC.read_text().splitlines():
        live.extend(session.feed(line, 5))
    return session, live, session.finish(0, "", 9)


def test_with_its_rollout_a_turn_is_one_call_per_model_request(tmp_path: Path) -> None:
    for compressed in (False, True):
        home = _home_with_rollout(tmp_path / str(compressed), compressed)
        session, live, outcome = _session(home)
        calls = [*live, *outcome.calls]
        assert len(calls) == 28 and all(c.kind == "model" for c in calls)
        assert sum((c.usage for c in calls), TokenUsage()) == TURN
        assert [c.detail["request"] for c in calls] == list(range(1, 29))
        assert {c.model for c in calls} == {"gpt-5.3-codex"}
        assert calls[0].detail["context_window"] == 258400
        assert outcome.details["requests"] == 28 and "notes" not in outcome.details
        assert outcome.result.model == "gpt-5.3-codex"  # the model Codex used, from the rollout
        # Recorded while the session ran (the file is read as Codex writes it).
        assert len(live) == 28


def test_without_a_rollout_the_turn_is_one_aggregate_row_that_says_so(tmp_path: Path) -> None:
    session, live, outcome = _session(tmp_path / "empty-home")
    (row,) = live
    assert row.kind == "reconciliation" and row.detail["aggregate"] == "turn"
    assert row.usage == TURN and "no rollout file for thread" in row.detail["reason"]
    assert "no per-request usage" in outcome.details["notes"][0]
    assert outcome.details["aggregated_turns"] == 1 and outcome.calls == []


def test_a_resumed_thread_counts_only_the_new_requests(tmp_path: Path) -> None:
    lines = ROLLOUT.read_text().splitlines(keepends=True)
    # The thread as an earlier invocation left it: everything up to its 20th request.
    counter, cut = RequestCounter(), 0
    while counter.requests < 20:
        counter.feed(parse_line(lines[cut]))
        cut += 1
    before = tmp_path / "before.jsonl"
    before.write_text("".join(lines[:cut]))
    floor = last_total(before)
    assert floor is not None
    earlier = len(requests_of(lines[:cut]))
    home = _home_with_rollout(tmp_path)
    session, live, outcome = _session(home, resumed={THREAD: floor})
    calls = [*live, *outcome.calls]
    assert earlier == 20 and len(calls) == 8
    spent = sum((c.usage for c in calls), TokenUsage())
    assert spent + codex_usage(floor) == TURN


def test_the_rollout_counting_more_than_the_turn_is_noted(tmp_path: Path) -> None:
    events = [json.loads(line) for line in EXEC.read_text().splitlines()]
    events[-1]["usage"]["input_tokens"] -= 1000  # the turn says less than the rollout
    exec_file = tmp_path / "exec.jsonl"
    exec_file.write_text("".join(json.dumps(e) + "\n" for e in events))
    session = CodexSession(home=_home_with_rollout(tmp_path), started_s=FEB_23)
    for line in exec_file.read_text().splitlines():
        session.feed(line, 5)
    outcome = session.finish(0, "", 9)
    assert "1,000 more tokens than Codex's turn totals" in outcome.details["notes"][0]
