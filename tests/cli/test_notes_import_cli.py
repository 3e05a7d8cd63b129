"""`tether notes import FILE.jsonl` and `tether notes search` modes through the real command
line: all or nothing, one sentence per bad line with its number, dates and supersession kept,
and the batch API under it."""

from __future__ import annotations

import json
from pathlib import Path

from memory_cli_support import fingerprint, one_sentence, tether

from store.db.seam import Database
from store.errors import ConflictError, InvalidInputError, NotFoundError
from store.memory.memory_store import MemoryStore
from store.memory.note_values import NoteInput


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_import_is_all_or_nothing_and_names_every_bad_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert tether("notes", "add", "workflow:x", "already here", "--workspace",
                  str(ws)).returncode == 0
    before = fingerprint(ws)
    bad = write_lines(tmp_path / "bad.jsonl", [
        json.dumps({"namespace": "workflow:x", "body": "fine"}),
        "{not json",
        json.dumps({"body": "no namespace"}),
        "",
        json.dumps({"namespace": "workflow:x", "body": "x", "status": "maybe"}),
        json.dumps({"namespace": "workflow:x", "body": "x", "colour": "red"}),
        json.dumps(["a list"]),
    ])
    result = tether("notes", "import", str(bad), "--workspace", str(ws))
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == [
        "Line 2", "Line 3", "Line 5", "Line 6", "Line 7"]
    assert all(line.endswith(".") for line in lines)
    assert lines[-1] == "Nothing was imported: 5 bad lines."
    assert fingerprint(ws) == before


def test_import_keeps_dates_edges_and_refuses_missing_targets(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    good = write_lines(tmp_path / "good.jsonl", [
        json.dumps({"namespace": "workflow:x", "body": "deploy with blue green", "id": "old",
                    "created_at_ms": 1_700_000_000_000, "tags": ["source:import"]}),
        json.dumps({"namespace": "workflow:x", "body": "deploy with canary", "id": "new",
                    "supersedes": ["old"], "author": "importer"}),
    ])
    result = tether("notes", "import", str(good), "--workspace", str(ws))
    assert result.returncode == 0 and result.stdout.strip() == "Imported 2 notes."
    listed = json.loads(tether("notes", "list", "--workspace", str(ws), "--status", "any",
                               "--include-superseded", "--format", "json").stdout)["items"]
    by_id = {n["id"]: n for n in listed}
    assert by_id["old"]["created_at_ms"] == 1_700_000_000_000
    assert by_id["new"]["supersedes"] == ["old"] and by_id["new"]["author"] == "importer"
    again = tether("notes", "import", str(good), "--workspace", str(ws))
    assert again.returncode == 0  # the same file again changes nothing
    before = fingerprint(ws)
    missing = write_lines(tmp_path / "missing.jsonl", [
        json.dumps({"namespace": "workflow:x", "body": "a"}),
        json.dumps({"namespace": "workflow:x", "body": "b", "supersedes": ["nope"]}),
    ])
    refused = tether("notes", "import", str(missing), "--workspace", str(ws))
    assert refused.returncode == 1
    assert "nope" in one_sentence(refused.stderr)
    assert fingerprint(ws) == before


def test_search_says_which_mode_answered(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    tether("notes", "add", "workflow:x", "The canary deploy rolls back on errors.",
           "--workspace", str(ws))
    every = tether("notes", "search", "canary deploy", "--workspace", str(ws))
    assert every.stdout.splitlines()[0] == "1 note (every word matched)"
    sentence = tether("notes", "search", "what happens when a canary deploy fails?",
                      "--workspace", str(ws))
    assert "no note holds every word" in sentence.stdout.splitlines()[0]
    hits = json.loads(tether("notes", "search", "when does the deploy roll back?",
                             "--workspace", str(ws), "--format", "json").stdout)["items"]
    assert hits[0]["mode"] == "any word" and "roll" in hits[0]["matched_terms"]


async def test_the_batch_api_is_one_transaction(db: Database) -> None:
    memory = MemoryStore(db)
    ids = await memory.save_notes([
        NoteInput("workflow:x", "first", id="a"),
        NoteInput("workflow:x", "second", supersedes=("a",), status="pending"),
    ])
    assert ids[0] == "a" and len(ids) == 2
    assert [n.id for n in await memory.supersedes(ids[1])] == ["a"]
    for bad, error in (
        ([NoteInput("workflow:x", "ok", id="z"), NoteInput("workflow:x", "")], InvalidInputError),
        ([NoteInput("workflow:y", "c", supersedes=("a",))], InvalidInputError),
        ([NoteInput("workflow:x", "d", supersedes=("missing",))], NotFoundError),
        ([NoteInput("workflow:x", "other text", id="a")], ConflictError),
        ([NoteInput("workflow:x", "e", id="dup"), NoteInput("workflow:x", "f", id="dup")],
         InvalidInputError),
        ([NoteInput("workflow:x", "g", id="g", supersedes=("h",)),
          NoteInput("workflow:x", "h", id="h", supersedes=("g",))], InvalidInputError),
    ):
        try:
            await memory.save_notes(bad)
        except error:
            pass
        else:
            raise AssertionError(f"{bad} was accepted")
    assert {n.id for n in await memory.list_notes(status="any")} == {"a", ids[1]}


def test_import_refuses_a_supersession_circle_of_any_length(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert tether("notes", "add", "workflow:x", "already here", "--workspace",
                  str(ws)).returncode == 0
    before = fingerprint(ws)
    for length in (2, 3, 40):
        ids = [f"n{index}" for index in range(length)]
        circle = write_lines(tmp_path / f"circle{length}.jsonl", [
            json.dumps({"namespace": "workflow:x", "body": f"note {index}", "id": note,
                        "supersedes": [ids[(index + 1) % length]]})
            for index, note in enumerate(ids)
        ])
        refused = tether("notes", "import", str(circle), "--workspace", str(ws))
        assert refused.returncode == 2, refused.stderr
        sentence = one_sentence(refused.stderr)
        assert "circle ('n0' -> 'n1' -> " in sentence and "nothing was written" in sentence
        assert fingerprint(ws) == before
    listed = tether("notes", "list", "--workspace", str(ws))
    assert "already here" in listed.stdout
