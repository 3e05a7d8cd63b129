"""How each recalled item was found reaches the person: `tether node` and the dashboard's
Memory tab both show the stored "why" (words matched, similarity, primer)."""

from __future__ import annotations

from memory_support import RecordingAgent, engine_with_hooks
from pydantic import BaseModel

from engine.memory.memory_config import MemoryConfig
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore
from tui.cli.memory_block_text import memory_block_lines
from tui.recall_words import readable_why
from tui.screens.run_detail_render import recalled_item_text


class Out(BaseModel):
    summary: str


async def test_node_and_memory_tab_show_how_items_were_found(db: Database) -> None:
    await MemoryStore(db).save_note("workflow:code-review", "Flaky fixtures were dropped.")
    wf = Workflow("why", agents={"rec": RecordingAgent()}, default_agent="rec")
    wf.add_task("review", "Review why the flaky fixtures dropping happened.", output=Out,
                memory=MemoryConfig(bank="code-review"))
    outcome = await engine_with_hooks(db).start(wf)
    block = (await RunStore(db).list_memory_blocks(outcome.run_id))[0]
    why = block.items[0]["why"]
    assert why.startswith("words ") and "fixtur" in why and "drop" in why
    # Shown in the words the task typed, not the stems recall matched on.
    shown = readable_why(block.items[0], block.query)
    assert shown.startswith("words ") and "fixtures" in shown and "dropping" in shown
    assert "fixtur," not in shown
    assert any(shown in line for line in memory_block_lines(block))
    assert shown in recalled_item_text(1, block.items[0], block.query).plain


def test_an_items_tags_have_their_own_line_after_a_long_why() -> None:
    item = {"id": "note:1", "namespace": "workflow:code-review", "score": 0.5,
            "why": "words " + ", ".join(f"term{i}" for i in range(60)),
            "tags": ["source:run", "scope:main"], "text": "Flaky fixtures were dropped."}
    lines = recalled_item_text(1, item).plain.splitlines()
    assert lines[1].startswith("    why: words term0") and "tags" not in lines[1]
    assert lines[2] == "    tags: source:run, scope:main"
    assert lines[3] == "    Flaky fixtures were dropped."
