"""``tether memory status``, ``tether memory reindex`` and the detached embedder that
``notes add`` starts, through the real command line (needs the semantic extra; see
tests/semantic_support.py)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from memory_cli_support import tether
from semantic_support import require_semantic


def vectors(workspace: Path) -> int:
    conn = sqlite3.connect(f"file:{workspace / 'tether.db'}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0])
    finally:
        conn.close()


def test_status_reindex_and_background_embedding(tmp_path: Path) -> None:
    require_semantic()
    ws = tmp_path / "ws"
    assert tether("notes", "add", "workflow:x", "Sam collects the kids on Tuesdays.",
                  "--workspace", str(ws)).returncode == 0
    assert tether("memory", "set", "workflow:x", "wifi", '"password on the fridge"',
                  "--workspace", str(ws)).returncode == 0
    status = tether("memory", "status", "--workspace", str(ws))
    assert status.returncode == 0
    assert status.stdout.startswith("recall: hybrid") and "vectors: 0" in status.stdout
    # Written, not embedded yet: status said "vectors: 0" and nothing about the two records
    # that semantic recall could not see yet.
    assert "; 2 waiting for one (found by keyword only until embedded" in status.stdout
    done = tether("memory", "reindex", "--workspace", str(ws), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Embedded 2 records" in done.stdout and "embedding" in done.stderr
    shown = json.loads(tether("memory", "status", "--workspace", str(ws), "--format",
                              "json").stdout)
    assert (shown["vectors"], shown["waiting"]) == (2, 0)
    assert "waiting" not in tether("memory", "status", "--workspace", str(ws)).stdout
    again = tether("memory", "reindex", "--workspace", str(ws), timeout=120)
    assert "Embedded 0 records" in again.stdout
    # With background embedding on, `notes add` returns at once and a detached embedder
    # writes the vector shortly after.
    added = tether("notes", "add", "workflow:x", "The boiler is serviced in March.",
                   "--workspace", str(ws), env={"TETHER_NO_BACKGROUND_EMBED": ""})
    assert added.returncode == 0
    deadline = time.monotonic() + 120
    while vectors(ws) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert vectors(ws) == 3
