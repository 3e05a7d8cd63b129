"""A node's write spelled for what it changes (store.runs.runs_sql.node_update) leaves the row
exactly as UPDATE_NODE does, for every combination of what a write may set, from every kind of
row it may find."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any

from store.db.sqlite.sqlite_database import SqliteDatabase
from store.model.states import NODE_STATES
from store.runs import runs_sql as sql
from store.workspace.layout import Workspace

BEFORE = [
    # state, attempts, cached, depends_on_json, output_json, error, started, finished, key, from
    ("pending", 0, 0, None, None, None, None, None, None, None),
    ("running", 2, 1, '["a"]', '{"x": 1}', "boom", 100, None, "k0", "r0"),
    ("failed", 3, 0, "[]", None, "bad", 100, 200, None, "r1"),
]


def _params(node_id: str, state: str, given: tuple[bool, ...]) -> dict[str, Any]:
    attempts, cached, depends, output, error, key, carried = given
    return {
        "run_id": "r1", "node_id": node_id, "iteration": 0, "state": state,
        "attempts": 5 if attempts else None, "cached": 1 if cached else None,
        "depends_on_json": '["b"]' if depends else None,
        "output_json": '"out"' if output else None, "set_output": output,
        "error": "err" if error else None, "set_error": error,
        "input_key": "k1" if key else None, "carried_from": "r9" if carried else None,
        "now": 500,
    }


async def test_every_write_leaves_the_row_update_node_leaves(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / ".tether")
    await (await SqliteDatabase.open(workspace)).close()  # a migrated workspace file
    conn = sqlite3.connect(workspace.root / "tether.db", isolation_level=None)
    conn.execute("INSERT INTO runs (run_id, workflow, status, created_at_ms, updated_at_ms) "
                 "VALUES ('r1', 'wf', 'running', 0, 0)")
    columns = ("state, attempts, cached, depends_on_json, output_json, error, started_at_ms, "
               "finished_at_ms, input_key, carried_from")
    checked = 0
    for (index, before), state, given in itertools.product(
            enumerate(BEFORE), sorted(NODE_STATES), itertools.product((False, True), repeat=7)):
        rows = []
        for way in ("generic", "spelled"):
            node_id = f"n{checked}-{way}"
            conn.execute(f"INSERT INTO nodes (run_id, node_id, iteration, {columns}, "
                         "updated_at_ms) VALUES ('r1', ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                         (node_id, *before))
            params = _params(node_id, state, given)
            update = sql.UPDATE_NODE if way == "generic" else sql.node_update(
                sql.node_update_params(params))
            assert conn.execute(update, params).rowcount == 1
            rows.append(conn.execute(
                f"SELECT {columns}, updated_at_ms, typeof(attempts), typeof(started_at_ms) "
                "FROM nodes WHERE node_id = ?", (node_id,)).fetchone())
        assert rows[0] == rows[1], (index, state, given)
        checked += 1
    conn.close()
    assert checked == len(BEFORE) * len(NODE_STATES) * 2 ** 7
