"""Bank-type tag rules (project and user banks) and mental-model primers: the pure rules
directly, then through the engine with a real workspace database."""

from __future__ import annotations

import pytest
from memory_support import RecordingAgent, engine_with_hooks
from pydantic import BaseModel

from engine.memory.block import PRIMERS_HEADING, RECALLED_HEADING, build_block
from engine.memory.keyword_recall import KeywordRecallBackend
from engine.memory.memory_access import recall_request
from engine.memory.memory_config import MemoryConfig
from engine.memory.recall_items import RecallItem
from engine.memory.tag_rules import bank_type, recall_tag_groups, write_tags_for
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.errors import InvalidInputError
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore

PROJECT = "workflow:project-shop"
USER = "user:alice"


def test_bank_types_come_from_the_namespace() -> None:
    assert bank_type(PROJECT) == "project"
    assert bank_type(USER) == "user"
    assert bank_type("workflow:code-review") == "plain"
    assert MemoryConfig(bank="project-shop").namespaces == (PROJECT,)
    assert MemoryConfig(bank="user-alice").namespaces == (USER,)


def test_project_writes_derive_and_check_the_scope() -> None:
    written = write_tags_for(PROJECT, ["branch:feature", "stream:checkout"],
                             ["source:reflection"], "run")
    assert written == ("branch:feature", "stream:checkout", "source:reflection", "scope:branch")
    assert write_tags_for(PROJECT, [], [], "run") == ("source:run", "scope:main")
    assert write_tags_for(PROJECT, ["branch:main"], [], "run")[-1] == "scope:main"
    streams = [f"stream:s{i}" for i in range(14)]  # + source + derived scope = 16
    assert len(write_tags_for(PROJECT, streams, [], "run")) == 16
    with pytest.raises(InvalidInputError, match="at most 16"):
        write_tags_for(PROJECT, [*streams, "stream:s14"], [], "run")
    with pytest.raises(InvalidInputError, match="contradicts"):
        write_tags_for(PROJECT, [], ["scope:branch"], "run")
    with pytest.raises(InvalidInputError, match="contradicts"):
        write_tags_for(PROJECT, ["branch:main"], ["scope:branch"], "run")
    with pytest.raises(InvalidInputError, match="at most one branch"):
        write_tags_for(PROJECT, ["branch:a"], ["branch:b"], "run")
    with pytest.raises(InvalidInputError, match="project-shop"):
        MemoryConfig(bank="project-shop", tags=["branch:a", "branch:b"])


def test_user_banks_refuse_project_tags_from_tools_and_drop_configured_ones() -> None:
    assert write_tags_for(USER, ["branch:main", "stream:x"], [], "run") == ("source:run",)
    for tag in ("branch:main", "scope:main", "stream:x"):
        with pytest.raises(InvalidInputError, match="user-bank"):
            write_tags_for(USER, [], [tag], "reflection")


def test_recall_scopes_by_bank_type() -> None:
    configured = ["branch:feature", "stream:checkout"]
    assert recall_tag_groups(PROJECT, configured) == (
        ("scope:main", "branch:feature"), ("stream:checkout",))
    assert recall_tag_groups(PROJECT, configured, ["source:run"])[-1] == ("source:run",)
    assert recall_tag_groups(USER, configured) == ()
    assert recall_tag_groups(USER, configured, ["source:chat"]) == (("source:chat",),)
    assert recall_tag_groups("workflow:x", configured) == (
        ("branch:feature",), ("stream:checkout",))


async def test_project_recall_sees_main_and_the_current_branch_only(db: Database) -> None:
    memory = MemoryStore(db)
    on = {"main": ("branch:main", "scope:main"), "feature": ("branch:feature", "scope:branch"),
          "other": ("branch:other", "scope:branch")}
    for name, tags in on.items():
        await memory.save_note(PROJECT, f"checkout retries are capped ({name})", note_id=name,
                               tags=tags)
    config = MemoryConfig(bank="project-shop", tags=["branch:feature"])
    result = await KeywordRecallBackend(db).recall(
        recall_request(config, "checkout retries", 10))
    assert sorted(item.id for item in result.items) == ["note:feature", "note:main"]


class Out(BaseModel):
    summary: str


async def test_primers_come_first_verbatim_under_the_same_budget(db: Database) -> None:
    memory = MemoryStore(db)
    model = "Mental model:\n1. The cart owns prices.\n2. Checkout never recomputes them."
    await memory.save_note("workflow:code-review", model, note_id="model")
    await memory.save_note("workflow:code-review", "Review checkout price rounding twice.")
    await memory.save_note("workflow:elsewhere", "Not in this bank", note_id="foreign")
    agent = RecordingAgent()
    wf = Workflow("primers", agents={"rec": agent}, default_agent="rec")
    wf.add_task("review", "Review checkout price rounding.", output=Out,
                memory=MemoryConfig(bank="code-review", primers=["model", "foreign"]))
    outcome = await engine_with_hooks(db).start(wf)
    assert outcome.status == "finished"
    block = (await RunStore(db).list_memory_blocks(outcome.run_id))[0]
    assert block.text is not None and block.text in agent.prompts[0]
    lines = block.text.splitlines()
    assert lines[1] == PRIMERS_HEADING and lines[2] == "### model (workflow:code-review)"
    assert "\n".join(lines[3:6]) == model  # verbatim, line breaks kept
    assert lines[6] == RECALLED_HEADING and lines[7] == "[workflow:code-review]"
    assert "rounding twice" in lines[8]
    assert block.items[0]["why"] == "primer (configured)"
    assert "words" in block.items[1]["why"]
    assert block.warning is not None and "primer foreign" in block.warning
    assert block.bytes_used <= block.budget_bytes


def test_primers_alone_and_a_tight_budget() -> None:
    primer = RecallItem("note:m", "primer", "workflow:x", None, "x" * 400, 0.0,
                        found_by=("primer",))
    item = RecallItem("note:n", "note", "workflow:x", None, "recalled text", 1.0)
    alone = build_block((), 2048, primers=[primer])
    assert alone.text is not None and RECALLED_HEADING not in alone.text
    tight = build_block([item], 300, primers=[primer])
    assert tight.text is not None and tight.bytes_used <= 300 and tight.truncated
    assert [entry.item.id for entry in tight.included] == ["note:m"]
    assert [i.id for i in tight.omitted] == ["note:n"]
    assert MemoryConfig(bank="x", recall="off", primers=["m"]).is_active
