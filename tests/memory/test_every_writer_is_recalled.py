"""Every writer's records are recalled by a task of their bank: ``tether notes add``, ``notes
import``, ``memory set``, ``tether mcp``'s ``remember`` and the runtime's retain, each into a
project bank (whose recall is scoped to ``scope:main`` plus the task's branch), asked exactly
as a task asks (``MemoryRuntime.block_for`` with ``MemoryConfig(bank=...)``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from memory_cli_support import tether

from engine.agents.cli.mcp_wiring import tether_program
from engine.memory.keyword_recall import KeywordRecallBackend
from engine.memory.memory_config import MemoryConfig
from engine.memory.runtime import MemoryRuntime
from store.db.backends import open_database
from store.db.seam import Database
from store.memory.bank_tags import effective_tags
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

BANK = "project-shop"
NAMESPACE = "workflow:project-shop"
QUESTION = "Which database does payments-api use?"
ANSWER = "payments-api stores its data in Postgres 15."
NO_EMBED = {"TETHER_NO_BACKGROUND_EMBED": "1"}


async def block_of_a_task(db: Database, config: MemoryConfig, prompt: str = QUESTION) -> str:
    """The block a task with ``config`` gets (keyword recall: the scope is what is tested)."""
    runs = RunStore(db)
    run = await runs.create_run("writers")
    runtime = MemoryRuntime(db, recall_backend=KeywordRecallBackend(db))
    prepared = await runtime.block_for(run.run_id, "ask", 0, 1, config, prompt)
    assert prepared.text is not None, prepared.warning
    return prepared.text


async def recalled_from(root: Path, config: MemoryConfig | None = None) -> str:
    async with await open_database(Workspace(root), create=False) as db:
        return await block_of_a_task(db, config or MemoryConfig(bank=BANK, recall=QUESTION))


def test_derived_scope_of_a_project_record_follows_its_branch() -> None:
    assert effective_tags(NAMESPACE, ()) == ("scope:main",)
    assert effective_tags(NAMESPACE, ("branch:main",)) == ("branch:main", "scope:main")
    assert effective_tags(NAMESPACE, ("branch:feat",)) == ("branch:feat", "scope:branch")
    assert effective_tags(NAMESPACE, ("scope:branch", "branch:x")) == ("scope:branch", "branch:x")
    assert effective_tags("workflow:plain", ("branch:feat",)) == ("branch:feat",)
    assert effective_tags("user:ada", ()) == ()


async def test_a_note_from_notes_add_is_recalled_by_a_project_task(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    added = tether("notes", "add", NAMESPACE, ANSWER, "--workspace", str(ws), env=NO_EMBED)
    assert added.returncode == 0, added.stderr
    assert ANSWER in await recalled_from(ws)
    branch_note = tether("notes", "add", NAMESPACE, "payments-api on feat uses SQLite.",
                         "--tag", "branch:feat", "--workspace", str(ws), env=NO_EMBED)
    assert branch_note.returncode == 0
    on_main = await recalled_from(ws)
    assert "SQLite" not in on_main  # another branch's note stays out of main's tasks
    on_feat = await recalled_from(ws, MemoryConfig(bank=BANK, recall=QUESTION,
                                                   tags=("branch:feat",)))
    assert "SQLite" in on_feat and ANSWER in on_feat


async def test_notes_from_notes_import_are_recalled_by_a_project_task(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    source = tmp_path / "notes.jsonl"
    source.write_text(json.dumps({"namespace": NAMESPACE, "body": ANSWER}) + "\n")
    imported = tether("notes", "import", str(source), "--workspace", str(ws), env=NO_EMBED)
    assert imported.returncode == 0, imported.stderr
    assert ANSWER in await recalled_from(ws)


async def test_a_fact_from_memory_set_is_recalled_by_a_project_task(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    value = json.dumps({"content": ANSWER})
    saved = tether("memory", "set", NAMESPACE, "payments-db", value, "--workspace", str(ws),
                   env=NO_EMBED)
    assert saved.returncode == 0, saved.stderr
    assert ANSWER in await recalled_from(ws)


async def test_a_note_from_mcp_remember_is_recalled_by_a_project_task(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    ws = tmp_path / "ws"
    argv = [*tether_program(), "mcp", "--workspace", str(ws), "--bank", BANK,
            "--status", "accepted"]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=NO_EMBED)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("remember", {"content": ANSWER})
        assert not result.is_error
    assert ANSWER in await recalled_from(ws)


async def test_a_retained_output_is_recalled_by_a_project_task(db: Database) -> None:
    config = MemoryConfig(bank=BANK, recall="off", retain="on-complete")
    runtime = MemoryRuntime(db, recall_backend=KeywordRecallBackend(db))
    runtime.retain_in_background("r1", "decide", 0, config, "prompt", ANSWER)
    await runtime.drain()
    assert ANSWER in await block_of_a_task(db, MemoryConfig(bank=BANK, recall=QUESTION))
