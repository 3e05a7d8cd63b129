"""The same note written several times reaches a task's block once: a person adding it twice
(or an import run twice) must not make the prompt read it twice and push out other evidence."""

from __future__ import annotations

import json
from pathlib import Path

from memory_cli_support import tether

from engine.memory.recall_items import RecallItem, without_repeats
from tui.run_control import EXAMPLES_DIR

FAST = {"TETHER_SIM_LATENCY_MS": "1"}
LESSON = "Flaky pytest fixtures: pin the random seed in conftest before retrying."


def _item(text: str, key: str | None = None, item_id: str = "note:a") -> RecallItem:
    return RecallItem(item_id, "note" if key is None else "fact", "workflow:x", key, text, 1.0)


def test_repeats_are_left_out_after_the_first_whatever_their_spacing_or_case() -> None:
    items = [_item("Pin the seed.", item_id="note:1"), _item("Other lesson.", item_id="note:2"),
             _item("  pin   THE seed. ", item_id="note:3"), _item("Pin the seed.", "seed",
                                                                  "fact:workflow:x/seed")]
    kept, repeats = without_repeats(items)
    assert [i.id for i in kept] == ["note:1", "note:2", "fact:workflow:x/seed"]  # a fact's key
    assert {k: [i.id for i in v] for k, v in repeats.items()} == {"note:1": ["note:3"]}


def test_a_note_added_three_times_is_in_the_block_once(tmp_path: Path) -> None:
    workspace = str(tmp_path / "ws")
    for body in (LESSON, LESSON, " ".join(LESSON.split(" ")).upper(),
                 "Retry flaky pytest fixtures only after reading their logs."):
        added = tether("notes", "add", "workflow:code-review", body, "--workspace", workspace)
        assert added.returncode == 0, added.stderr
    ran = tether("run", str(EXAMPLES_DIR / "code_review.py"), "--workspace", workspace,
                 "--input", '{"change": "retry flaky pytest fixtures"}', "--format", "json",
                 env=FAST)
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    shown = tether("node", "review", "--run", run_id, "--workspace", workspace,
                   "--format", "json")
    assert shown.returncode == 0, shown.stderr
    block = json.loads(shown.stdout)["memory_block"]
    lines = [line.casefold() for line in block["text"].splitlines()]
    assert lines.count(f"- {LESSON}".casefold()) == 1, block["text"]
    assert "- retry flaky pytest fixtures only after reading their logs." in lines
    assert len(block["items"]) == 2
    assert "2 recalled items repeating a higher-ranked item's text left out" in block["warning"]
