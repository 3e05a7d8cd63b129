"""Disk full for real: a small tmpfs mounted in a private mount namespace (run this script under
``unshare --mount --map-root-user``), filled while ``tether run`` is writing.

Prints one JSON document with what each step did; ``test_storage_errors.py`` asserts on it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

DEADLINE_S = 120.0


def main(mount: Path, workflow: str) -> dict[str, object]:
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(mount)],
                   check=True)
    workspace = mount / "ws"

    def tether(*args: str) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(workspace)],
            capture_output=True, text=True, timeout=DEADLINE_S,
        )
        return {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

    results: dict[str, object] = {"before": tether("memory", "set", "user:a", "kept", '"yes"')}
    run = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", "run", workflow, "--format", "json",
         "--workspace", str(workspace)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: list[str] = []
    assert run.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(run.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()

    def wait_for(text: str) -> bool:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if any(text in line for line in lines):
                return True
            if run.poll() is not None:
                return any(text in line for line in lines)
            time.sleep(0.05)
        return False

    results["started"] = wait_for("finished")  # at least one node done before the disk fills
    filler = mount / "filler"
    # Unbuffered: a buffered file keeps what a partial write left and raises ENOSPC again when
    # it closes (whether it does depends on how the free space divides, i.e. on the schema).
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError as error:
            results["filled"] = error.strerror
    results["interrupted_seen"] = wait_for("interrupted")
    results["set_while_full"] = tether("memory", "set", "user:a", "during", '"x" ')
    results["note_while_full"] = tether("notes", "add", "user:a", "a note while the disk is full")
    results["list_while_full"] = tether("memory", "list", "user:a")
    filler.unlink()
    run.wait(timeout=DEADLINE_S)
    reader.join(timeout=DEADLINE_S)
    results["run_code"] = run.returncode
    results["run_stderr"] = "".join(lines)[-3000:]
    results["runs"] = tether("runs", "--format", "json")
    results["after"] = tether("memory", "set", "user:a", "after", '"written"')
    results["get_kept"] = tether("memory", "get", "user:a", "kept")
    conn = sqlite3.connect(f"file:{workspace / 'tether.db'}?mode=ro", uri=True)
    results["integrity"] = conn.execute("PRAGMA integrity_check").fetchall()
    conn.close()
    os.sync()
    return results


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2])))
