"""Which recall a task gets: ``MemoryConfig(mode=...)``, the workspace's ``[memory] mode``, a
mode the installed encoder cannot serve, ``tether memory status`` saying which is in force and
why, and the first recall of a fresh ``tether run`` being hybrid (the model loads at engine
start and the first recall waits for it within the recall timeout)."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path

import pytest
from semantic_support import require_semantic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from memory_cli_support import one_sentence, tether

from engine.memory.memory_config import MemoryConfig
from engine.memory.recall_mode import MemorySettings, resolve_mode
from engine.memory.runtime import MemoryRuntime
from store.db.seam import Database
from store.errors import InvalidInputError
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore

NS = "workflow:household"
NOTE = "Sam picks up the kids from school on Tuesdays."
PARAPHRASE = "Who collects the children after class?"  # shares no word with NOTE
NO_EMBED = {"TETHER_NO_BACKGROUND_EMBED": "1"}


def test_resolution_of_the_mode_in_force() -> None:
    auto = MemorySettings()
    assert resolve_mode(None, auto, True, "encoder x").mode == "hybrid"
    assert resolve_mode(None, auto, False, "none installed").mode == "keyword"
    keyword_workspace = MemorySettings(mode="keyword")
    chosen = resolve_mode(None, keyword_workspace, True, "encoder x")
    assert chosen.mode == "keyword" and "[memory] mode" in chosen.why
    task = resolve_mode("semantic", keyword_workspace, True, "encoder x")
    assert task.mode == "semantic" and "task's memory config" in task.why
    fallback = resolve_mode("hybrid", auto, False, "onnxruntime is not installed")
    assert fallback.mode == "keyword" and fallback.fallback_from == "hybrid"
    assert "onnxruntime is not installed" in fallback.why
    with pytest.raises(InvalidInputError, match="mode must be one of"):
        MemoryConfig(bank="x", mode="fuzzy")


async def blocks(db: Database, runtime: MemoryRuntime, mode: str | None) -> tuple[str | None,
                                                                                 str | None]:
    run = await RunStore(db).create_run("modes")
    config = MemoryConfig(bank=NS, recall=PARAPHRASE, mode=mode)
    prepared = await runtime.block_for(run.run_id, "ask", 0, 1, config, PARAPHRASE)
    return prepared.text, prepared.warning


async def test_the_task_mode_overrides_the_workspace_mode(db: Database) -> None:
    require_semantic()
    await MemoryStore(db).save_note(NS, NOTE)
    hybrid_workspace = MemoryRuntime(db)
    hybrid_workspace.written()  # as after `notes add`: the embedder gives the note its vector
    await hybrid_workspace.drain()
    text, _ = await blocks(db, hybrid_workspace, None)
    assert text is not None and NOTE in text  # hybrid by default finds the paraphrase
    text, warning = await blocks(db, hybrid_workspace, "keyword")
    assert text is None and warning is not None and "nothing in" in warning
    keyword_workspace = MemoryRuntime(db, settings=MemorySettings(mode="keyword"))
    assert (await blocks(db, keyword_workspace, None))[0] is None
    text, _ = await blocks(db, keyword_workspace, "semantic")
    assert text is not None and NOTE in text


async def test_a_mode_the_encoder_cannot_serve_runs_by_keyword_and_says_so(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    await MemoryStore(db).save_note(NS, NOTE)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    runtime = MemoryRuntime(db, settings=MemorySettings(encoder="minilm-onnx-int8"))
    run = await RunStore(db).create_run("modes")
    config = MemoryConfig(bank=NS, recall="When does Sam pick up the kids?", mode="hybrid")
    prepared = await runtime.block_for(run.run_id, "ask", 0, 1, config, "prompt")
    assert prepared.text is not None and NOTE in prepared.text  # the task still gets a block
    assert prepared.warning is not None
    assert "hybrid is set by the task's memory config but semantic recall is off" in (
        prepared.warning) and "onnxruntime is not installed" in prepared.warning


def test_memory_status_says_which_mode_is_in_force_and_why(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.toml").write_text('[memory]\nmode = "keyword"\n')
    status = tether("memory", "status", "--workspace", str(ws), "--format", "json")
    assert status.returncode == 0, status.stderr
    state = json.loads(status.stdout)
    assert state["recall"] == "keyword"
    assert state["why"] == "keyword, set by the workspace's [memory] mode"
    (ws / "config.toml").write_text('[memory]\nmode = "fuzzy"\n')
    refused = tether("memory", "status", "--workspace", str(ws))
    assert refused.returncode == 2
    assert "memory.mode must be one of auto, hybrid, semantic, keyword" in one_sentence(
        refused.stderr)


WORKFLOW = '''
from engine import MemoryConfig, TaskContext, Workflow

workflow = Workflow("ask-twice", agents={"sim": {"type": "simulated", "latency_ms": 0}},
                    default_agent="sim")
memory = MemoryConfig(bank="household", recall="Who collects the children after class?")

@workflow.task(id="first", memory=memory)
def first(ctx: TaskContext) -> str:
    return "Plan the week."

@workflow.task(id="second", depends_on=["first"], memory=memory)
def second(ctx: TaskContext) -> str:
    return "Plan the next week."
'''


def test_the_first_recall_of_a_fresh_run_is_hybrid(tmp_path: Path) -> None:
    require_semantic()
    ws = tmp_path / "ws"
    assert tether("notes", "add", NS, NOTE, "--workspace", str(ws), env=NO_EMBED).returncode == 0
    assert tether("memory", "reindex", "--workspace", str(ws), timeout=120).returncode == 0
    flow = tmp_path / "ask_twice.py"
    flow.write_text(WORKFLOW)
    # A generous recall timeout: the first recall waits for the model within it, however
    # loaded the machine is (the default 2 s covers a quiet machine's load).
    slow_machine = {**NO_EMBED, "TETHER_MEMORY_TIMEOUT_MS": "120000"}
    done = tether("run", str(flow), "--workspace", str(ws), env=slow_machine, timeout=240)
    assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(f"file:{ws / 'tether.db'}?mode=ro", uri=True)
    rows = conn.execute("SELECT node_id, text, warning FROM memory_blocks ORDER BY node_id")
    found = {node: (text, warning) for node, text, warning in rows}
    conn.close()
    assert set(found) == {"first", "second"}
    for text, warning in found.values():
        assert text is not None and NOTE in text, warning  # found by meaning, not by words
        assert warning is None
