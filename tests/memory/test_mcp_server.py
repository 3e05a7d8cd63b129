"""``tether mcp``: a real server subprocess driven by the official MCP SDK's stdio client, and the
command agent wiring it into Claude Code and Codex (the fake CLI calls the tools through it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from cli_agent_support import capture, fake_agent, recorded, run_one
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from engine.agents.cli.mcp_wiring import tether_program
from engine.memory.memory_config import MemoryConfig
from store.db.database_url import for_child_process
from store.db.seam import Database
from store.errors import InvalidInputError
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore

BANK = "code-review"
NAMESPACE = MemoryConfig(bank=BANK, tools=True).namespaces[0]


async def _session_calls(
    workspace: Path,
    extra: list[str],
    calls: list[tuple[str, dict[str, Any]]],
    database_url: str | None = None,
) -> tuple[list[Any], list[Any]]:
    argv = [*tether_program(), "mcp", "--workspace", str(workspace), "--bank", BANK, *extra]
    if database_url:
        argv += ["--database-url", for_child_process(database_url)]
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    results = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        for name, arguments in calls:
            results.append(await session.call_tool(name, arguments))
    return tools, results


def _payload(result: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads("".join(c.text for c in result.content))
    return data


async def test_tether_mcp_serves_remember_and_recall_with_the_engine_semantics(
    db: Database,
) -> None:
    root = db.workspace.root
    tools, results = await _session_calls(
        root,
        [],
        [
            ("remember", {"content": "Run ruff before pytest in CI.", "tags": ["scope:main"]}),
            ("remember", {"content": "x" * 9000}),
            ("remember", {"content": "ok", "bank": "elsewhere"}),
        ],
        db.workspace.database_url,
    )
    assert sorted(t.name for t in tools) == ["recall", "remember"]
    schema_text = json.dumps([t.input_schema for t in tools])
    for constraint in ("maxLength", "minLength", "maxItems", "minimum", "maximum"):
        assert constraint not in schema_text  # grammar-based servers choke on these
    saved, too_long, wrong_bank = results
    assert not saved.is_error and _payload(saved)["status"] == "pending"  # reviewed first
    assert too_long.is_error and "the limit is 8,000" in _payload(too_long)["error"]
    assert wrong_bank.is_error and "not one of this task's banks" in _payload(wrong_bank)["error"]
    memory = MemoryStore(db)
    (note,) = await memory.list_notes(NAMESPACE, status="pending")
    assert note.body == "Run ruff before pytest in CI." and "scope:main" in note.tags
    await memory.accept_note(note.id)
    _, (found,) = await _session_calls(
        root, [], [("recall", {"query": "ruff pytest"})], db.workspace.database_url
    )
    answer = _payload(found)
    assert answer["ok"] and note.id in json.dumps(answer["items"])
    assert answer["bytes_used"] <= answer["budget_bytes"] == 2048


async def test_claude_code_task_with_tools_reaches_memory_through_tether_mcp(
    db: Database, tmp_path: Path
) -> None:
    agent = fake_agent(
        tmp_path,
        "claude-code",
        {
            "stdout": capture("claude-code/C_gleam_basic_query_stream.jsonl"),
            "expect": [["--allowedTools", "mcp__tether__remember,mcp__tether__recall"]],
            "record": tmp_path / "argv.json",
            "mcp_calls": [
                {"tool": "remember", "arguments": {"content": "Cache keys include the prompt."}},
                {"tool": "recall", "arguments": {"query": "cache keys prompt"}},
            ],
            "mcp_results": tmp_path / "mcp.json",
        },
    )
    memory = MemoryConfig(bank=BANK, recall="off", tools=True)
    outcome = await run_one(db, agent, memory=memory)
    assert outcome.status == "finished", outcome.error
    remembered, recalled = json.loads((tmp_path / "mcp.json").read_text())
    assert remembered["names"] == ["recall", "remember"] and not remembered["is_error"]
    note_id = json.loads(remembered["text"])["note_id"]
    assert note_id in recalled["text"]
    (note,) = await MemoryStore(db).list_notes(NAMESPACE)
    assert (note.id, note.run_id, note.node_id, note.status) == (
        note_id,
        outcome.run_id,
        "work",
        "accepted",
    )
    events = await RunStore(db).events_since(0, run_id=outcome.run_id)
    tool_events = [e for e in events if e.type == "memory.tool"]
    assert [(e.node_id, e.attempt, e.payload["tool"]) for e in tool_events] == [
        ("work", 1, "remember"),
        ("work", 1, "recall"),
    ]
    argv = recorded(tmp_path / "argv.json")["argv"]
    config = json.loads(argv[argv.index("--mcp-config") + 1])
    server = config["mcpServers"]["tether"]
    assert server["args"][:3] == ["mcp", "--workspace", str(db.workspace.root)]


async def test_codex_task_with_tools_gets_the_server_through_config_flags(
    db: Database, tmp_path: Path
) -> None:
    agent = fake_agent(
        tmp_path,
        "codex",
        {
            "stdout": capture("codex/X3_0147_ok.jsonl"),
            "mcp_calls": [
                {
                    "tool": "remember",
                    "arguments": {"content": "Pin plotext below 6.", "propose": True},
                }
            ],
            "mcp_results": tmp_path / "mcp.json",
        },
    )
    outcome = await run_one(db, agent, memory=MemoryConfig(bank=BANK, recall="off", tools=True))
    assert outcome.status == "finished", outcome.error
    (result,) = json.loads((tmp_path / "mcp.json").read_text())
    assert json.loads(result["text"])["status"] == "pending"
    (note,) = await MemoryStore(db).list_notes(NAMESPACE, status="pending")
    assert note.run_id == outcome.run_id and note.body == "Pin plotext below 6."


async def test_tools_on_an_agent_that_cannot_take_them_is_refused_at_definition(
    db: Database, tmp_path: Path
) -> None:
    agent = fake_agent(tmp_path, "json", {"stdout": capture("codex/X3_0147_ok.jsonl")})
    with pytest.raises(InvalidInputError, match="cannot take tools"):
        await run_one(db, agent, memory=MemoryConfig(bank=BANK, recall="off", tools=True))
    assert await RunStore(db).list_runs() == []


async def test_a_remember_retried_after_its_reply_was_lost_makes_no_second_note(
    db: Database,
) -> None:
    # A client whose pipe closed mid-call never saw the reply and retries in a new session:
    # the retry names the note the first call stored.
    root, url = db.workspace.root, db.workspace.database_url
    call = ("remember", {"content": "The staging database is read-only on Fridays."})
    _, (first,) = await _session_calls(root, [], [call], url)
    _, (retried, other) = await _session_calls(
        root, [], [call, ("remember", {"content": "The staging database is read-only on Fridays.",
                                       "tags": ["scope:main"]})], url)
    assert _payload(retried)["note_id"] == _payload(first)["note_id"]
    assert _payload(other)["note_id"] != _payload(first)["note_id"]  # another note: tags differ
    notes = await MemoryStore(db).list_notes(NAMESPACE, status="pending")
    assert sorted(n.id for n in notes) == sorted({_payload(first)["note_id"],
                                                  _payload(other)["note_id"]})
