"""An agent CLI for the Ray tests (json preset): every invocation appends ``start`` and, when it
answers, ``done`` lines to the file named by TETHER_TEST_COUNT, so a test counts how many times
each node really ran. With TETHER_TEST_RELEASE it holds until that file exists (the test decides
when the work ends); with TETHER_TEST_LEAVE it first starts a detached process that outlives it
(what an agent CLI's own children do when its parent is killed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def note(line: str) -> None:
    fd = os.open(os.environ["TETHER_TEST_COUNT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main() -> None:
    sys.stdin.read()
    node = os.environ["TETHER_NODE_ID"]
    attempt = os.environ["TETHER_ATTEMPT"]
    if os.environ.get("TETHER_TEST_LEAVE"):
        left = subprocess.Popen(["sleep", "600"], start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        note(f"leftover {node} {attempt} {left.pid}")
    note(f"start {node} {attempt} {os.getpid()}")
    print(f"working on {node}, attempt {attempt}", flush=True)
    release = os.environ.get("TETHER_TEST_RELEASE")
    deadline = time.monotonic() + 300
    while release and not Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # the agent's own work: it waits for the test to let it finish
    note(f"done {node} {attempt} {os.getpid()}")
    answer = {"output": f"reviewed {node}", "usage": {"input_tokens": 120, "output_tokens": 30}}
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
