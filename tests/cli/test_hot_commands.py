"""The hot commands (``memory get``, ``notes add``, ``runs``) on the console script's fast path.

``tui.cli.entry`` reads those three command lines itself and runs them without click; every
other command line goes to click. These tests hold the fast path to the click path's exact
behaviour: the same stdout, stderr, exit code and stored data for a corpus of command lines
(run as real processes, both ways), the same options and choices as the click commands
declare, a fallback to click for anything it does not fully understand, and no heavy module
imported on the way (what keeps these commands within 4x of ``python -c pass``; the timing
itself is measured in ``bench/bench_cli_startup.py``, never asserted here).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import pytest
from memory_cli_support import REPO_ROOT

from store.clock import ManualClock
from store.db.sqlite.direct import DirectDatabase, run_now
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.cli.entry import _SPECS, HOT_COMMANDS, HotCall, parse_hot, run_hot
from tui.cli.output import MAX_LIMIT

TEN_DAYS_MS = 10 * 24 * 3600 * 1000


def seed(root: Path) -> None:
    """Facts (one expired), notes to supersede, and 60 runs of several statuses, written ten
    days in the past through the store (so no age shown changes between two processes)."""
    clock = ManualClock()
    clock.set(int(__import__("time").time() * 1000) - TEN_DAYS_MS)
    db = DirectDatabase.open_now(Workspace(root), clock=clock)
    memory = MemoryStore(db)
    runs = RunStore(db)
    run_now(memory.set_fact("workflow:hot", "answer", {"use": "pytest -x", "n": [1, 2.5]}))
    run_now(memory.set_fact("workflow:hot", "text", "line one\nline two \u00e9"))
    run_now(memory.set_fact("workflow:hot", "gone", 1, ttl_ms=1000))
    run_now(memory.save_note("workflow:hot", "Run ruff first.", note_id="n-old"))
    for i in range(60):
        status = ("finished", "failed", "running", "cancelled")[i % 4]
        run_now(runs.create_run(f"flow-{i % 3}", input={"i": i}, status=status,
                                run_id=f"r-{i:03d}", nodes_total=i % 5))
    run_now(db.close())


# One command line per case; "{ws}" is the seeded workspace, "{none}" a folder without one.
CORPUS: list[tuple[str, ...]] = [
    ("memory", "get", "workflow:hot", "answer", "--workspace", "{ws}"),
    ("--workspace", "{ws}", "memory", "get", "workflow:hot", "text"),
    ("memory", "get", "workflow:hot", "answer", "--format", "json", "--workspace={ws}"),
    ("memory", "get", "workflow:hot", "gone", "--workspace", "{ws}"),
    ("memory", "get", "workflow:hot", "missing", "--workspace", "{ws}"),
    ("memory", "get", "team:x", "answer", "--workspace", "{ws}"),
    ("memory", "get", "workflow:hot", "bad\x07key", "--workspace", "{ws}"),
    ("memory", "get", "workflow:hot", "answer", "--workspace", "{none}"),
    ("memory", "get", "workflow:hot", "answer", "--format", "yaml", "--workspace", "{ws}"),
    ("memory", "get", "workflow:hot", "--workspace", "{ws}"),
    ("memory", "get", "--help"),
    ("runs", "--workspace", "{ws}"),
    ("runs", "--limit", "7", "--workspace", "{ws}"),
    ("runs", "--status", "failed", "--format", "json", "--workspace", "{ws}"),
    ("runs", "--status=stale", "--limit=2", "--format=jsonl", "--workspace", "{ws}"),
    ("runs", "--limit", "0", "--workspace", "{ws}"),
    ("runs", "--limit", "1_0", "--workspace", "{ws}"),
    ("runs", "--status", "asleep", "--workspace", "{ws}"),
    ("runs", "--workspace", "{none}"),
    ("runs", "extra", "--workspace", "{ws}"),
    ("notes", "add", "workflow:hot", "Prefer pytest -x.", "--workspace", "{ws}"),
    ("notes", "add", "workflow:hot", "Use uv.", "--tag", "tools", "--tag", "py", "--kind",
     "tip", "--status", "pending", "--supersedes", "n-old", "--workspace", "{ws}"),
    ("notes", "add", "workflow:hot", "-", "--workspace", "{ws}"),
    ("notes", "add", "workflow:hot", "Nope.", "--supersedes", "n-missing", "--workspace",
     "{ws}"),
    ("notes", "add", "workflow:hot", "", "--workspace", "{ws}"),
    ("notes", "add", "workflow:hot", "Fresh.", "--workspace", "{none}"),
    ("notes", "add", "workflow:hot", "Odd.", "--status", "rejected", "--workspace", "{ws}"),
    ("notes", "add", "workflow:hot", "--", "-x", "--workspace", "{ws}"),
]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hot") / "ws"
    seed(root)
    return root


def _tether(module: str, args: list[str], cwd: Path, stdin: bytes) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TETHER_WORKSPACE", "TETHER_DATABASE_URL")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, timeout=60)


def _notes(root: Path) -> list[tuple[object, ...]]:
    """Every note but its id and time, with what it supersedes, read after both processes
    ended (this process holds no connection while they run)."""
    if not (root / "tether.db").exists():
        return []
    with sqlite3.connect(f"file:{root / 'tether.db'}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT n.namespace, n.body, n.kind, n.tags_json, n.author, n.status,"
            " (SELECT group_concat(s.supersedes_id) FROM note_supersessions s"
            "  WHERE s.note_id = n.id) FROM notes n ORDER BY n.rowid"
        ).fetchall()
    conn.close()
    return rows


def _masked(text: str) -> str:
    """Output with generated note ids and the AGE column made comparable."""
    text = re.sub(r"(?m)^[0-9a-f]{16}$", "<note id>", text)
    return re.sub(r"(?m) +\S+$", " <age>", text) if text.startswith("RUN ") else text


def _copy_workspace(source: Path, target: Path) -> None:
    """A copy made through SQLite's backup API (never by copying the file)."""
    target.mkdir(parents=True)
    with sqlite3.connect(f"file:{source / 'tether.db'}?mode=ro", uri=True) as src:
        dst = sqlite3.connect(target / "tether.db")
        src.backup(dst)
        dst.close()
    src.close()


def _outcome(module: str, case: tuple[str, ...], seeded: Path, folder: Path) -> tuple:
    ws = folder / "ws"
    _copy_workspace(seeded, ws)
    args = [a.replace("{ws}", str(ws)).replace("{none}", str(folder / "none")) for a in case]
    done = _tether(module, args, folder, b"A note from stdin.\n")
    stdout = _masked(done.stdout.decode("utf-8", "replace"))
    stderr = done.stderr.decode("utf-8", "replace").replace(str(folder), "<folder>")
    return done.returncode, stdout, stderr, _notes(ws), _notes(folder / "none")


def test_the_fast_path_and_click_give_the_same_result_for_every_case(
    seeded: Path, tmp_path: Path
) -> None:
    def both(index: int) -> tuple[tuple, tuple]:
        case = CORPUS[index]
        return (_outcome("tui.cli.entry", case, seeded, tmp_path / f"fast{index}"),
                _outcome("tui.cli.main", case, seeded, tmp_path / f"click{index}"))

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(both, range(len(CORPUS))))
    for case, (fast, slow) in zip(CORPUS, results, strict=True):
        assert fast == slow, case
    codes = [fast[0] for fast, _ in results]
    assert codes.count(0) >= 10 and {1, 2} <= set(codes)  # successes and refusals both
    # A note with tags, kind, status and a supersession was stored, the same both ways.
    added = results[next(i for i, case in enumerate(CORPUS) if "Use uv." in case)][0]
    assert added[0] == 0 and added[3][-1][1:] == (
        "Use uv.", "tip", '["tools", "py"]', "cli", "pending", "n-old"
    )


def test_hot_command_lines_are_parsed_as_click_would_read_them() -> None:
    call = parse_hot(["--workspace", "W", "notes", "add", "workflow:x", "-", "--tag", "a",
                      "--tag=b", "--kind", "k"])
    assert call == HotCall("notes add", ("workflow:x", "-"),
                           {"--tag": ["a", "b"], "--kind": ["k"]}, "W")
    assert parse_hot(["runs"]) == HotCall("runs", (), {}, None)
    assert parse_hot(["runs", "--limit", str(MAX_LIMIT)]) is not None
    assert parse_hot(["memory", "get", "--format", "json", "ns", "key"]) == HotCall(
        "memory get", ("ns", "key"), {"--format": ["json"]}, None)


@pytest.mark.parametrize("argv", [
    [], ["memory"], ["memory", "list"], ["notes", "search", "x"], ["run", "flow.py"],
    ["runs", "--help"], ["runs", "-h"], ["memory", "get", "a", "b", "--", "c"],
    ["runs", "--limit"], ["runs", "--limit", "0"], ["runs", "--limit", str(MAX_LIMIT + 1)],
    ["runs", "--limit", "٣"], ["runs", "--limit", "+5"], ["runs", "--status", "asleep"],
    ["runs", "--format", "json", "--format", "text"],
    ["runs", "--database-url", "postgresql://h/d"], ["--database-url", "postgresql://h/d", "runs"],
    ["runs", "--workspace", "a", "--workspace", "b"],
    ["--workspace", "a", "runs", "--workspace", "a"],
    ["--workspace"], ["--workspacex", "a", "runs"],
    ["memory", "get", "ns"], ["memory", "get", "ns", "key", "more"], ["notes", "add", "ns"],
    ["notes", "add", "ns", "body", "--kind", "-x"], ["notes", "add", "ns", "-body"],
    ["notes", "add", "ns", "body", "--status", "rejected"], ["runs", "--verbose"],
])
def test_anything_else_is_left_to_click(argv: list[str]) -> None:
    assert parse_hot(argv) is None


def _click_command(name: str) -> click.Command:
    from tui.cli.main import cli

    context = click.Context(cli)
    group: click.Command | None = cli
    for word in name.split():
        assert isinstance(group, click.Group)
        group = group.get_command(context, word)
    assert group is not None
    return group


@pytest.mark.parametrize("name", HOT_COMMANDS)
def test_the_fast_parser_knows_exactly_the_click_commands_options(name: str) -> None:
    command = _click_command(name)
    positional_count, specs = _SPECS[name]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    options = {p.opts[0]: p for p in command.params if isinstance(p, click.Option)}
    assert len(arguments) == positional_count and all(a.nargs == 1 for a in arguments)
    assert set(options) - {"--workspace"} == set(specs)
    for option_name, (choices, repeatable) in specs.items():
        option = options[option_name]
        assert option.multiple == repeatable, option_name
        kind = option.type
        if isinstance(kind, click.Choice):
            assert tuple(kind.choices) == choices, option_name
        elif isinstance(kind, click.IntRange):
            assert (kind.min, kind.max, choices) == (1, MAX_LIMIT, None)
        else:
            assert choices is None, option_name


def test_the_console_script_is_the_fast_entry() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"]["tether"] == "tui.cli.entry:main"


def test_a_postgresql_workspace_goes_to_click(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Nothing listens on port 9: answering here (instead of returning None) would fail loudly.
    monkeypatch.setenv("TETHER_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    monkeypatch.chdir(tmp_path)
    for argv in (["runs"], ["memory", "get", "workflow:x", "k"], ["notes", "add", "ns", "b"]):
        call = parse_hot(argv)
        assert call is not None and run_hot(call) is None
    assert not (tmp_path / ".tether").exists()


HEAVY = ("click", "dataclasses", "inspect", "asyncio", "uuid", "hashlib", "tomllib",
         "subprocess", "shutil", "secrets", "numpy", "textual", "pydantic", "httpx", "engine",
         "opentelemetry", "grpc")

PROBE = """
import json, sys
from tui.cli.entry import main
heavy_roots = json.loads(sys.argv[2])
sys.argv = ["tether", *json.loads(sys.argv[1])]
code = 0
try:
    main(fast_exit=False)
except SystemExit as done:
    code = done.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in heavy_roots)
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def _probe(argv: list[str], cwd: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_DATABASE_URL"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    found: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    return found


def test_hot_commands_import_no_heavy_module(seeded: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _copy_workspace(seeded, ws)
    w = ["--workspace", str(ws)]
    for argv in (["memory", "get", "workflow:hot", "answer", *w],
                 ["notes", "add", "workflow:hot", "Cheap to add.", *w],
                 ["runs", *w], ["runs", "--format", "json", *w]):
        assert _probe(argv, tmp_path) == {"code": 0, "heavy": []}, argv
    slow = _probe(["memory", "list", "workflow:hot", *w], tmp_path)
    assert slow["code"] == 0 and "click" in slow["heavy"]  # the probe does see click
