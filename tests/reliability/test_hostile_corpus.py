"""The hostile-input corpus: arguments, stdin, files, workflow files, config, ids and database
files that must each be refused with exactly one sentence on stderr and the right exit code,
leaving the workspace as it was (compared from this process, which holds no connection to it
between commands) or, where there was none, not creating one.

Every case runs the real entry point (``tui.cli.entry.main``, what the console script calls) in
this process through :mod:`cli_harness`; a sample also runs as a real subprocess, so both are
known to agree.
Agent output is covered with the agents (engine/agents tests), the dashboard's editor and
palette in ``tests/tui_actions/test_hostile_dashboard.py``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cli_harness import EndlessZeros, argv_text, run_cli
from storage_support import REPO_ROOT, seed, workspace_state

from store.db.sqlite.sqlite_schema import APPLICATION_ID, SCHEMA_VERSION

NS = "workflow:seed"
DEEP = "[" * 50_000 + "]" * 50_000
HUGE_INT = "9" * 5000
BIG_BODY_FILE = "big.json"
TINY = """
from engine import Workflow
from pydantic import BaseModel

class In(BaseModel):
    files: list[str]

workflow = Workflow("tiny", default_agent="simulated", input_model=In)
workflow.add_task("plan", lambda ctx: "Plan " + ", ".join(ctx.input.files))
"""


@dataclass(frozen=True)
class Hostile:
    """One hostile input and the refusal it must get."""

    id: str
    args: tuple[str, ...]
    code: int
    says: str
    stdin: bytes | Callable[[], object] = b""
    workspace: str = "seeded"
    """``seeded``: an existing workspace that must stay as it was; ``none``: none exists and
    none may be created; ``file``: the database file itself is the hostile input."""
    files: dict[str, bytes | str] = field(default_factory=dict)
    """Files written into the case folder first (workflow files, inputs, configs)."""
    db: Callable[[Path], None] | None = None
    """Makes the hostile ``tether.db`` (for ``workspace="file"``)."""


def workflow(body: str) -> dict[str, bytes | str]:
    return {"wf.py": body}


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()


def _newer(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 3}")
    conn.execute("CREATE TABLE future (x)")
    conn.commit()
    conn.close()


def _damaged(path: Path) -> None:
    _foreign(path)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.commit()
    conn.close()
    data = bytearray(path.read_bytes())
    data[4096:8192] = b"\xa5" * 4096  # the table's b-tree page
    path.write_bytes(bytes(data))


def _not_sqlite(path: Path) -> None:
    path.write_bytes(b"some notes, not a database\n" * 20)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()


def _symlink_to_healthy(path: Path) -> None:
    real = path.parent.parent / "real-ws"
    seed_minimal(real)
    path.symlink_to(real / "tether.db")


def _dangling_symlink(path: Path) -> None:
    path.symlink_to(path.parent.parent / "nowhere" / "tether.db")


def seed_minimal(root: Path) -> None:
    outcome = run_cli(["memory", "set", NS, "k", "1", "--workspace", str(root)], cwd=root.parent)
    assert outcome.code == 0, outcome.stderr


SET = ("memory", "set", NS, "key")
RUN = ("run", "{dir}/tiny.py", "--input")
TINY_FILE = {"tiny.py": TINY}

CORPUS: list[Hostile] = [
    # -- JSON values on the command line ------------------------------------------------------
    Hostile("value-not-json", (*SET, '{"a":'), 2, "not valid JSON"),
    Hostile("value-1e400", (*SET, "1e400"), 2, "too large for JSON"),
    Hostile("value-minus-1e400", (*SET, '{"x": -1e400}'), 2, "too large for JSON"),
    Hostile("value-5000-digits", (*SET, HUGE_INT), 2, "5,000 digits"),
    Hostile("value-deep", (*SET, DEEP), 2, "nested more than"),
    Hostile("value-lone-surrogate", (*SET, '"\\ud800"'), 2, "lone surrogate"),
    Hostile("value-surrogate-key", (*SET, '{"\\udfff": 1}'), 2, "lone surrogate"),
    Hostile("value-nan", (*SET, "NaN"), 2, "not allowed"),
    Hostile("value-infinity", (*SET, "[Infinity]"), 2, "not allowed"),
    Hostile("value-bad-utf8-arg", (*SET, argv_text(b'"\xff\xfe"')), 2, "UTF-8"),
    Hostile("value-empty", (*SET, ""), 2, "not valid JSON"),
    Hostile("value-two-documents", (*SET, "1 2"), 2, "not valid JSON"),
    # -- stdin and files ------------------------------------------------------------------
    Hostile("value-endless-stdin", (*SET, "-"), 2, "larger than 1.0 MiB", stdin=EndlessZeros),
    Hostile("value-bad-utf8-stdin", (*SET, "-"), 2, "not valid UTF-8", stdin=b'"\xc3\x28"'),
    Hostile("value-dev-zero", (*SET, "@/dev/zero"), 2, "larger than 1.0 MiB"),
    Hostile("value-big-file", (*SET, "@{dir}/" + BIG_BODY_FILE), 2, "larger than 1.0 MiB",
            files={BIG_BODY_FILE: '"' + "x" * (2 * 1024 * 1024) + '"'}),
    Hostile("value-missing-file", (*SET, "@{dir}/missing.json"), 2, "Cannot read"),
    Hostile("value-folder-as-file", (*SET, "@{dir}"), 2, "Cannot read"),
    Hostile("note-endless-stdin", ("notes", "add", NS, "-"), 2, "larger than",
            stdin=EndlessZeros),
    Hostile("note-dev-zero", ("notes", "add", NS, "@/dev/zero"), 2, "larger than"),
    # -- other arguments ------------------------------------------------------------------
    Hostile("namespace-empty-id", ("memory", "set", "workflow:", "k", "1"), 2, "empty id"),
    Hostile("namespace-blank", ("memory", "set", " user:a", "k", "1"), 2, "whitespace"),
    Hostile("namespace-control-chars", ("memory", "set", "user:a\x1b[2J", "k", "1"), 2,
            "namespace"),
    Hostile("key-empty", ("memory", "set", NS, "", "1"), 2, "key is empty"),
    Hostile("ttl-negative", (*SET, "1", "--ttl", "-5"), 2, "--ttl"),
    Hostile("ttl-huge", (*SET, "1", "--ttl", "1" + "0" * 40), 2, "--ttl"),
    Hostile("note-body-empty", ("notes", "add", NS, ""), 2, "body"),
    Hostile("note-status-unknown", ("notes", "add", NS, "b", "--status", "maybe"), 2,
            "--status"),
    Hostile("note-too-many-tags", ("notes", "add", NS, "b",
                                   *[arg for i in range(20) for arg in ("--tag", f"t{i}")]),
            2, "tags"),
    Hostile("note-accept-unknown", ("notes", "accept", "no-such-note"), 1, "no-such-note"),
    Hostile("search-limit-zero", ("notes", "search", "x", "--limit", "0"), 2, "--limit"),
    Hostile("runs-status-unknown", ("runs", "--status", "sideways"), 2, "--status"),
    Hostile("runs-limit-zero", ("runs", "--limit", "0"), 2, "--limit"),
    Hostile("limit-negative", ("memory", "limit", "--max-tokens", "-1"), 2, "--max-tokens"),
    Hostile("missing-argument", ("memory", "set", NS), 2, "Missing argument"),
    Hostile("extra-argument", ("memory", "get", NS, "k", "extra"), 2, "unexpected extra"),
    Hostile("unknown-command", ("frobnicate",), 2, "No such command"),
    Hostile("unknown-option", ("runs", "--colour"), 2, "No such option"),
    Hostile("workspace-twice", ("--workspace", "{dir}/other", "runs"), 2, "given twice"),
    # -- ids ------------------------------------------------------------------------------
    Hostile("node-run-dot-dot", ("node", "plan", "--run", ".."), 2, "not a run id"),
    Hostile("node-run-slash", ("node", "plan", "--run", "r-1/../../etc"), 2, "not a run id"),
    Hostile("node-id-nul", ("node", "a\x00b", "--run", "r-1"), 2, "NUL"),
    Hostile("cancel-dot-dot", ("cancel", ".."), 2, "not a run id"),
    Hostile("cancel-absolute", ("cancel", "/etc/passwd"), 2, "not a run id"),
    Hostile("clear-dot-dot", ("clear", "..", "--reason", "x"), 2, "not a run id"),
    Hostile("clear-empty-reason", ("clear", "r-1", "--reason", " "), 2, "reason"),
    Hostile("cancel-unknown", ("cancel", "r-000000000000"), 1, "no run"),
    Hostile("resume-dot-dot", ("run", "{dir}/tiny.py", "--resume", ".."), 2, "not a run id",
            files=TINY_FILE),
    Hostile("resume-unknown", ("run", "{dir}/tiny.py", "--resume", "r-000000000000"), 1,
            "no run", files=TINY_FILE),
    # -- run input: nothing may be created ------------------------------------------------
    Hostile("input-not-json", (*RUN, '{"files":'), 2, "not valid JSON", workspace="none",
            files=TINY_FILE),
    Hostile("input-1e400", (*RUN, '{"files": [], "n": 1e400}'), 2, "too large",
            workspace="none", files=TINY_FILE),
    Hostile("input-5000-digits", (*RUN, HUGE_INT), 2, "digits", workspace="none",
            files=TINY_FILE),
    Hostile("input-deep", (*RUN, DEEP), 2, "nested", workspace="none", files=TINY_FILE),
    Hostile("input-surrogate", (*RUN, '{"files": ["\\ud800"]}'), 2, "surrogate",
            workspace="none", files=TINY_FILE),
    Hostile("input-bad-utf8", (*RUN, argv_text(b'{"files": ["\xff"]}')), 2, "UTF-8",
            workspace="none", files=TINY_FILE),
    Hostile("input-dev-zero", (*RUN, "@/dev/zero"), 2, "larger than 1.0 MiB",
            workspace="none", files=TINY_FILE),
    Hostile("input-endless-stdin", (*RUN, "-"), 2, "larger than 1.0 MiB", stdin=EndlessZeros,
            workspace="none", files=TINY_FILE),
    Hostile("input-big-file", (*RUN, "@{dir}/" + BIG_BODY_FILE), 2, "larger than",
            workspace="none", files={**TINY_FILE, BIG_BODY_FILE: "[" + "1," * 600_000 + "1]"}),
    Hostile("input-wrong-type", (*RUN, '{"files": 3}'), 2, "invalid at files",
            workspace="none", files=TINY_FILE),
    Hostile("input-and-resume", (*RUN, "{}", "--resume", "r-1"), 2, "cannot be combined",
            workspace="none", files=TINY_FILE),
    # -- workflow files: nothing may be created -------------------------------------------
    Hostile("workflow-missing", ("run", "{dir}/nope.py"), 2, "no workflow file",
            workspace="none"),
    Hostile("workflow-not-python", ("run", "{dir}/wf.txt"), 2, "not a Python file",
            workspace="none", files={"wf.txt": "hello"}),
    Hostile("workflow-folder", ("run", "{dir}"), 2, "no workflow file", workspace="none"),
    Hostile("workflow-syntax", ("run", "{dir}/wf.py"), 2, "syntax error", workspace="none",
            files=workflow("def broken(:\n")),
    Hostile("workflow-bad-utf8", ("run", "{dir}/wf.py"), 2, "wf.py", workspace="none",
            files={"wf.py": b"x = '\xff\xfe'\n"}),
    Hostile("workflow-raises", ("run", "{dir}/wf.py"), 2, "failed to load", workspace="none",
            files=workflow("raise RuntimeError('nope')\n")),
    Hostile("workflow-exits", ("run", "{dir}/wf.py"), 2, "exit", workspace="none",
            files=workflow("import sys\nsys.exit(7)\n")),
    Hostile("workflow-none", ("run", "{dir}/wf.py"), 2, "defines no Workflow",
            workspace="none", files=workflow("x = 1\n")),
    Hostile("workflow-cycle", ("run", "{dir}/wf.py"), 2, "cycle", workspace="none",
            files=workflow("from engine import Workflow\nworkflow = Workflow('c')\n"
                           "workflow.add_task('a', 'x', depends_on=['b'])\n"
                           "workflow.add_task('b', 'y', depends_on=['a'])\n")),
    Hostile("workflow-unknown-dependency", ("run", "{dir}/wf.py"), 2, "ghost",
            workspace="none",
            files=workflow("from engine import Workflow\nworkflow = Workflow('c')\n"
                           "workflow.add_task('a', 'x', depends_on=['ghost'])\n")),
    Hostile("workflow-empty-prompt", ("run", "{dir}/wf.py"), 2, "empty prompt",
            workspace="none",
            files=workflow("from engine import Workflow\nworkflow = Workflow('c')\n"
                           "workflow.add_task('a', lambda ctx: '  ')\n")),
    Hostile("workflow-unknown-agent", ("run", "{dir}/wf.py"), 2, "No agent named",
            workspace="none",
            files=workflow("from engine import Workflow\n"
                           "workflow = Workflow('c', default_agent='ghost')\n"
                           "workflow.add_task('a', 'x')\n")),
    Hostile("workflow-bad-ceiling", ("run", "{dir}/wf.py"), 2, "ceiling", workspace="none",
            files=workflow("from engine import Workflow\n"
                           "workflow = Workflow('c', ceiling='lots')\n"
                           "workflow.add_task('a', 'x')\n")),
    # -- config: refused before anything is written ----------------------------------------
    Hostile("config-not-toml", ("run", "{dir}/tiny.py", "--input", '{"files": []}'), 2,
            "not valid TOML", files={**TINY_FILE, "ws/config.toml": "this is = = not toml"}),
    Hostile("config-unknown-key", ("run", "{dir}/tiny.py", "--input", '{"files": []}'), 2,
            "unknown [engine] setting",
            files={**TINY_FILE, "ws/config.toml": "[engine]\nturbo = true\n"}),
    Hostile("config-zero-concurrency", ("run", "{dir}/tiny.py", "--input", '{"files": []}'), 2,
            "concurrency", files={**TINY_FILE, "ws/config.toml": "[engine]\nconcurrency = 0\n"}),
    Hostile("config-agent-without-type", ("run", "{dir}/tiny.py", "--input", '{"files": []}'),
            2, "must be a table with a type",
            files={**TINY_FILE, "ws/config.toml": "[agents.x]\nmodel = 'm'\n"}),
    Hostile("config-bad-utf8", ("run", "{dir}/tiny.py", "--input", '{"files": []}'), 2,
            "is not UTF-8 text", files={**TINY_FILE, "ws/config.toml": b"[engine]\n# \xff\n"}),
    Hostile("config-huge", ("run", "{dir}/tiny.py", "--input", '{"files": []}'), 2,
            "larger than 1 MiB",
            files={**TINY_FILE, "ws/config.toml": "# " + "x" * (2 * 1024 * 1024) + "\n"}),
    Hostile("config-deep", ("run", "{dir}/tiny.py", "--input", '{"files": []}'), 2,
            "not valid TOML",
            files={**TINY_FILE, "ws/config.toml": "a = " + "[" * 5000 + "]" * 5000 + "\n"}),
    # -- database files -------------------------------------------------------------------
    Hostile("db-not-sqlite", SET + ("1",), 2, "not a SQLite database", workspace="file",
            db=_not_sqlite),
    Hostile("db-not-sqlite-read", ("memory", "list"), 2, "not a SQLite database",
            workspace="file", db=_not_sqlite),
    Hostile("db-foreign", SET + ("1",), 2, "does not belong to Tether", workspace="file",
            db=_foreign),
    Hostile("db-newer", ("runs",), 2, "newer Tether", workspace="file", db=_newer),
    Hostile("db-damaged", ("notes", "add", NS, "b"), 3, "is damaged", workspace="file",
            db=_damaged),
    Hostile("db-fifo", SET + ("1",), 2, "named pipe", workspace="file", db=_fifo),
    Hostile("db-fifo-read", ("memory", "list"), 2, "named pipe", workspace="file", db=_fifo),
    Hostile("db-folder", ("runs",), 2, "is a folder", workspace="file", db=_folder),
    Hostile("db-symlink", SET + ("1",), 2, "symbolic link", workspace="file",
            db=_symlink_to_healthy),
    Hostile("db-dangling-symlink", SET + ("1",), 2, "symbolic link", workspace="file",
            db=_dangling_symlink),
    Hostile("workspace-is-a-file", ("memory", "set", NS, "k", "1", "--workspace",
                                    "{dir}/plain.txt"), 2, "Cannot open the workspace",
            workspace="none", files={"plain.txt": "not a folder"}),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workspace = tmp_path_factory.mktemp("corpus") / "ws"
    seed(workspace)
    return workspace


def folder_state(case_dir: Path) -> dict[str, str]:
    """Everything under the case folder, as this process (holding no connection) sees it."""
    state: dict[str, str] = {}
    for path in sorted(case_dir.rglob("*")):
        name = str(path.relative_to(case_dir))
        if path.is_symlink():
            state[name] = "-> " + os.readlink(path)
        elif path.is_dir():
            state[name] = "dir"
        elif path.is_fifo():
            state[name] = "fifo"
    if (case_dir / "ws").is_dir() and not (case_dir / "ws").is_symlink():
        for name, digest in workspace_state(case_dir / "ws").items():
            state["ws/" + name] = digest
    return state


def prepare(case: Hostile, case_dir: Path, template: Path) -> None:
    import shutil

    if case.workspace == "seeded":
        shutil.copytree(template, case_dir / "ws")
    elif case.workspace == "file":
        (case_dir / "ws").mkdir()
        assert case.db is not None
        case.db(case_dir / "ws" / "tether.db")
    for name, content in case.files.items():
        path = case_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def expand(case: Hostile, case_dir: Path) -> list[str]:
    args = [arg.replace("{dir}", str(case_dir)) for arg in case.args]
    if "--workspace" not in case.args or case.id == "workspace-twice":
        args += ["--workspace", str(case_dir / "ws")]
    return args


def check_one_sentence(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    (line,) = lines
    assert line.startswith("tether: ") and line.endswith("."), line
    assert "Traceback" not in line and "\x1b" not in line
    return line


@pytest.mark.parametrize("case", CORPUS, ids=[case.id for case in CORPUS])
def test_hostile_input_is_refused_with_one_sentence_and_changes_nothing(
    case: Hostile, tmp_path: Path, template: Path
) -> None:
    case_dir = tmp_path / "case"
    case_dir.mkdir()
    prepare(case, case_dir, template)
    before = folder_state(case_dir)
    stdin = case.stdin() if callable(case.stdin) else case.stdin
    outcome = run_cli(expand(case, case_dir), cwd=case_dir, stdin=stdin)  # type: ignore[arg-type]
    assert outcome.code == case.code, (outcome.code, outcome.stdout, outcome.stderr)
    line = check_one_sentence(outcome.stderr)
    assert case.says.lower() in line.lower(), line
    assert outcome.stdout == ""
    assert folder_state(case_dir) == before
    assert not (case_dir / ".tether").exists()


def test_the_corpus_is_large_and_covers_every_kind() -> None:
    ids = [case.id for case in CORPUS]
    assert len(ids) == len(set(ids)) >= 80
    for prefix in ("value-", "input-", "workflow-", "config-", "db-", "note-", "node-"):
        assert any(i.startswith(prefix) for i in ids), prefix


@pytest.mark.parametrize("case_id", ["value-deep", "input-dev-zero", "db-fifo", "cancel-dot-dot",
                                     "missing-argument", "value-bad-utf8-arg"])
def test_a_real_process_gives_the_same_refusal(
    case_id: str, tmp_path: Path, template: Path
) -> None:
    case = next(c for c in CORPUS if c.id == case_id)
    case_dir = tmp_path / "case"
    case_dir.mkdir()
    prepare(case, case_dir, template)
    before = folder_state(case_dir)
    env = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    args = [os.fsencode(arg) for arg in expand(case, case_dir)]
    done = subprocess.run([sys.executable, "-m", "tui.cli.entry", *args], cwd=case_dir, env=env,
                          input=b"", capture_output=True, timeout=120)
    assert done.returncode == case.code, done.stderr
    line = check_one_sentence(done.stderr.decode("utf-8", "replace"))
    assert case.says.lower() in line.lower()
    assert folder_state(case_dir) == before
    assert json.dumps(line)  # printable
