"""``tether memory`` and ``tether notes`` end to end through real subprocesses."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from memory_cli_support import REPO_ROOT, fingerprint, one_sentence, tether

from store.workspace.layout import FIRST_WRITE

NS = "workflow:code-review"


@pytest.fixture(scope="module")
def seeded_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with one fact and two notes, built once and copied per test."""
    ws = tmp_path_factory.mktemp("template") / "ws"
    created = tether("memory", "set", NS, "answer", '"use pytest -x"', "--workspace", str(ws))
    assert created.returncode == 0, created.stderr
    first = tether("notes", "add", NS, "Run ruff before pytest.", "--workspace", str(ws))
    assert first.returncode == 0, first.stderr
    (ws / "first-note-id").write_text(first.stdout.strip())
    return ws


@pytest.fixture
def seeded(seeded_template: Path, tmp_path: Path) -> tuple[Path, str]:
    ws = tmp_path / "ws"
    shutil.copytree(seeded_template, ws)
    note_id = (ws / "first-note-id").read_text()
    (ws / "first-note-id").unlink()
    return ws, note_id


def test_set_then_get_prints_the_exact_json(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    set_result = tether("memory", "set", NS, "answer", '"use pytest -x"', "--workspace", ws)
    assert set_result.returncode == 0, set_result.stderr
    got = tether("memory", "get", NS, "answer", "--workspace", ws)
    assert (got.returncode, got.stdout) == (0, '"use pytest -x"\n')
    spaced = '{ "steps": ["ruff", "pytest -x"],\n  "n": 2 }'
    assert tether("memory", "set", NS, "plan", spaced, "--ttl", "60000",
                  "--workspace", ws).returncode == 0
    assert tether("memory", "get", NS, "plan", "--workspace", ws).stdout == spaced + "\n"

    listing = tether("memory", "list", "--workspace", ws)
    assert listing.returncode == 0
    lines = listing.stdout.splitlines()
    assert lines[0] == NS
    assert lines[1].split()[:2] == ["answer", '"use']
    assert "expires in" in lines[2] and "\x1b" not in listing.stdout  # no colour off a TTY

    as_json = json.loads(tether("memory", "list", NS, "--format", "json", "--workspace", ws).stdout)
    assert as_json["more"] == 0
    assert [(f["key"], f["value"], f["ttl_ms"]) for f in as_json["items"]] == [
        ("answer", "use pytest -x", None),
        ("plan", {"steps": ["ruff", "pytest -x"], "n": 2}, 60000),
    ]
    removed = tether("memory", "rm", NS, "answer", "--workspace", ws)
    assert removed.returncode == 0
    missing = tether("memory", "get", NS, "answer", "--workspace", ws)
    assert missing.returncode == 1
    assert one_sentence(missing.stderr) == "There is no fact 'answer' in namespace " \
        "'workflow:code-review'."


def test_long_values_are_truncated_in_listings(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    bio = json.dumps("x" * 500)
    assert tether("memory", "set", "user:alice", "bio", bio, "--workspace", ws).returncode == 0
    line = tether("memory", "list", "--workspace", ws).stdout.splitlines()[1]
    assert "…" in line and len(line) < 140


def test_value_from_stdin_and_file(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    assert tether("memory", "set", NS, "a", "-", "--workspace", ws, stdin=b"[1, 2]").returncode == 0
    value_file = tmp_path / "v.json"
    value_file.write_text('{"from": "file"}')
    assert tether("memory", "set", NS, "b", f"@{value_file}", "--workspace", ws).returncode == 0
    assert tether("memory", "get", NS, "a", "--workspace", ws).stdout == "[1, 2]\n"
    assert tether("memory", "get", NS, "b", "--workspace", ws).stdout == '{"from": "file"}\n'


def test_reading_commands_never_create_a_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "nothing-here"
    # A folder that is not there is a mistake to say (a typo), not an empty listing.
    listing = tether("memory", "list", "--workspace", str(ws))
    assert (listing.returncode, listing.stdout) == (1, "")
    assert listing.stderr == f"tether: There is no Tether workspace at {ws}; {FIRST_WRITE}.\n"
    for command in (("notes", "list"), ("runs",), ("memory", "get", NS, "k"),
                    ("memory", "rm", NS, "k"), ("notes", "accept", "abc")):
        assert tether(*command, "--workspace", str(ws)).returncode == 1, command
    assert not ws.exists()
    # A workspace folder nothing has written to yet lists nothing, and stays empty.
    ws.mkdir()
    listing = tether("memory", "list", "--workspace", str(ws))
    assert (listing.returncode, listing.stdout) == (0, "No facts.\n")
    listed = tether("memory", "list", "--format", "json", "--workspace", str(ws)).stdout
    assert json.loads(listed) == {"items": [], "more": 0}
    assert tether("notes", "list", "--workspace", str(ws)).stdout == "No notes.\n"
    assert list(ws.iterdir()) == []


def test_notes_lifecycle(seeded: tuple[Path, str]) -> None:
    ws, original = seeded
    w = ("--workspace", str(ws))
    proposal = tether("notes", "add", NS, "Run ruff, then mypy, then pytest -x.", "--status",
                      "pending", "--supersedes", original, "--tag", "ci", *w)
    assert proposal.returncode == 0, proposal.stderr
    new_id = proposal.stdout.strip()
    assert len(proposal.stdout.splitlines()) == 1 and new_id

    def live_ids() -> list[str]:
        out = tether("notes", "list", NS, "--format", "json", *w).stdout
        return [note["id"] for note in json.loads(out)["items"]]

    assert live_ids() == [original]  # a pending proposal hides nothing
    pending = json.loads(tether("notes", "list", "--status", "pending", "--format", "json",
                                *w).stdout)["items"]
    assert [(n["id"], n["supersedes"], n["tags"]) for n in pending] == [(new_id, [original],
                                                                        ["ci"])]
    accepted = tether("notes", "accept", new_id, *w)
    assert accepted.returncode == 0 and "retires 1 note" in accepted.stdout
    assert live_ids() == [new_id]
    again = tether("notes", "accept", new_id, *w)  # said "Accepted …; it retires 1 note." again
    assert again.returncode == 0
    assert again.stdout == f"Note {new_id} is already accepted; nothing changed.\n"
    hits = json.loads(tether("notes", "search", "mypy pytest", "--format", "json", *w).stdout)
    hits = hits["items"]
    assert [hit["id"] for hit in hits] == [new_id]
    text = tether("notes", "list", "--include-superseded", *w).stdout
    assert f"superseded by {new_id} (accepted)" in text
    rejected = tether("notes", "reject", new_id, "--reason", "too strict", *w)
    assert rejected.returncode == 0
    assert live_ids() == [original]
    everything = json.loads(tether("notes", "list", "--status", "any", "--format", "json",
                                   *w).stdout)["items"]
    assert {n["id"]: n["status_reason"] for n in everything}[new_id] == "too strict"
    scoped = tether("notes", "search", "ruff", "--namespace", "user:nobody", *w)
    assert scoped.stdout == "No matching notes.\n"


def _run_in_pty(*args: str) -> str:
    """Run the CLI with stdout on a pseudo-terminal; return what it wrote."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("TETHER_WORKSPACE", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", *args], stdout=follower, stderr=follower,
        stdin=subprocess.DEVNULL, env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=30)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_status_colours_only_on_a_terminal(seeded: tuple[Path, str]) -> None:
    ws, _ = seeded
    assert tether("notes", "add", NS, "proposal", "--status", "pending", "--workspace",
                  str(ws)).returncode == 0
    on_tty = _run_in_pty("notes", "list", "--status", "any", "--workspace", str(ws))
    assert "\x1b[32maccepted" in on_tty and "\x1b[33mpending" in on_tty
    piped = tether("notes", "list", "--status", "any", "--workspace", str(ws)).stdout
    assert "accepted" in piped and "\x1b" not in piped


def _ten_mib_value() -> bytes:
    return b'"' + b"x" * (10 * 1024 * 1024) + b'"'


BAD_INPUT = [
    pytest.param(("memory", "set", NS, "k", '{"a": 1'), None, 2,
                 "not valid JSON: Expecting ',' delimiter at line 1 column 8",
                 id="value-not-json"),
    pytest.param(("memory", "set", "workflow:", "k", "1"), None, 2, "empty id",
                 id="namespace-empty-id"),
    pytest.param(("memory", "set", "workflow:a\x1b[2J", "k", "1"), None, 2,
                 "control character U+001B", id="namespace-escape-sequence"),
    pytest.param(("memory", "set", b"workflow:\xff\xfe", "k", "1"), None, 2,
                 "namespace is not valid UTF-8", id="namespace-non-utf8"),
    pytest.param(("memory", "set", NS, b"key\xff", "1"), None, 2,
                 "key is not valid UTF-8", id="key-non-utf8"),
    pytest.param(("memory", "set", NS, "k", b'"\xc3\x28"'), None, 2,
                 "value is not valid UTF-8", id="value-non-utf8"),
    pytest.param(("memory", "set", NS, "k", "-"), _ten_mib_value(), 2,
                 "The value is larger than 1.0 MiB", id="value-10-mib"),
    pytest.param(("memory", "rm", NS, "nope"), None, 1, "There is no fact 'nope'",
                 id="rm-unknown-fact"),
    pytest.param(("notes", "accept", "no-such-note"), None, 1,
                 "There is no note with id 'no-such-note'", id="accept-unknown-note"),
    pytest.param(("notes", "add", NS, "x", "--supersedes", "ghost"), None, 1,
                 "There is no note with id 'ghost' to supersede", id="supersede-unknown"),
    pytest.param(("notes", "add", NS, "   "), None, 2, "note body is empty", id="empty-body"),
    pytest.param(("notes", "add", NS, b"bad \xff body"), None, 2, "not valid UTF-8",
                 id="body-non-utf8"),
    pytest.param(("notes", "search", '"*:()'), None, 2, "no words", id="search-no-words"),
]


@pytest.mark.parametrize(("args", "stdin", "code", "message"), BAD_INPUT)
def test_bad_input_exits_with_one_sentence_and_changes_nothing(
    seeded: tuple[Path, str],
    args: tuple[str | bytes, ...],
    stdin: bytes | None,
    code: int,
    message: str,
) -> None:
    ws, _ = seeded
    before = fingerprint(ws)
    result = tether(*args, "--workspace", str(ws), stdin=stdin)
    assert result.returncode == code, result.stderr
    assert message in one_sentence(result.stderr)
    assert result.stdout == ""
    assert fingerprint(ws) == before


def test_cross_namespace_supersession_refused_unchanged(seeded: tuple[Path, str]) -> None:
    ws, original = seeded
    before = fingerprint(ws)
    result = tether("notes", "add", "workflow:other", "x", "--supersedes", original,
                    "--workspace", str(ws))
    assert result.returncode == 2
    assert "can only supersede notes of its own namespace" in one_sentence(result.stderr)
    assert fingerprint(ws) == before


def test_usage_errors_exit_2_and_change_nothing(seeded: tuple[Path, str]) -> None:
    ws, _ = seeded
    before = fingerprint(ws)
    for args in (("memory", "set", NS, "k", "1", "--ttl", "-5"),
                 ("memory", "limit", "--max-tokens", "many")):
        result = tether(*args, "--workspace", str(ws))
        assert result.returncode == 2, (args, result.stderr)
    assert fingerprint(ws) == before


def test_a_group_without_its_command_names_the_commands_in_one_sentence() -> None:
    """``tether memory`` alone printed the group's whole help flattened onto one error line
    ("tether: Usage: tether memory [OPTIONS] COMMAND [ARGS]... Facts (namespaced ... Commands:
    gc Remove expired ..."), cut off mid-word."""
    result = tether("memory")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "tether: 'tether memory' needs a command: gc, get, limit, list, reindex, rm, set, "
        "status or summarize (see 'tether memory --help').\n")
    notes = tether("notes")
    assert notes.returncode == 2 and "'tether notes' needs a command: accept, add," in notes.stderr
    assert one_sentence(tether("export").stderr).startswith("'tether export' needs a command")


def test_an_option_without_its_value_names_the_commands_help() -> None:
    """``tether node a --run`` said "(see 'tether --help')": click's parser raises that error
    without a context, so the sentence fell back to the top-level help."""
    for args, path in ((("node", "a", "--run"), "tether node"),
                       (("memory", "set", "a", "b", "c", "--ttl"), "tether memory set"),
                       (("--workspace", "/nowhere", "runs", "--limit"), "tether runs")):
        result = tether(*args)
        assert result.returncode == 2
        assert one_sentence(result.stderr).endswith(f"requires an argument (see '{path} --help')."
                                                    ), result.stderr


def test_a_bad_ttl_is_not_told_it_may_be_blank(seeded: tuple[Path, str]) -> None:
    """``--ttl -5`` said "TTL must be blank or a duration …", but a blank --ttl is refused.
    ``--ttl 0`` (or 0s) was taken and wrote a fact already expired; it is refused alike, and
    nothing is written."""
    ws, _ = seeded
    before = fingerprint(ws)
    for ttl in ("-5", "", "soon", "0", "0s", "0d"):
        result = tether("memory", "set", NS, "k", "1", "--ttl", ttl, "--workspace", str(ws))
        assert result.returncode == 2
        assert one_sentence(result.stderr) == (
            "Invalid value for '--ttl': TTL must be a duration above 0 such as 90000, 30s, 5m, "
            "2h or 7d (see 'tether memory set --help')."), ttl
    assert fingerprint(ws) == before


def test_limit_and_gc_report_what_they_did(seeded: tuple[Path, str]) -> None:
    ws, _ = seeded
    limit = tether("memory", "limit", "--max-tokens", "100", "--workspace", str(ws))
    assert limit.returncode == 0
    assert limit.stdout == "Removed 0 messages from 0 threads to keep each within 100 tokens.\n"
    assert tether("memory", "gc", "--workspace", str(ws)).stdout == "Removed 0 expired facts.\n"


@pytest.mark.parametrize("namespace", ["team:x", "Workflow:x"])
def test_a_namespace_with_an_unknown_kind_is_refused(
    seeded: tuple[Path, str], namespace: str
) -> None:
    ws, _note = seeded
    before = fingerprint(ws)
    for args in (("memory", "set", namespace, "k", "1"), ("notes", "add", namespace, "body")):
        result = tether(*args, "--workspace", str(ws))
        assert result.returncode == 2, result.stderr
        sentence = one_sentence(result.stderr)
        assert "workflow, agent, user or global" in sentence
    assert fingerprint(ws) == before
