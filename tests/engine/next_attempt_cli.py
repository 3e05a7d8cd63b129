"""A one-shot CLI for the next-attempt steer tests: a real program run by the command agent
(json preset), which cannot take input once started. Every invocation appends
``{"prompt"}`` (what it read on stdin) to ``$STEER_RECORD``. Its first invocation writes
``$STEER_READY``, waits (bounded) for ``$STEER_READY.go`` so a test can send steers while it
runs, then fails with a transient error; every later one answers."""

import json
import os
import sys
import time
from pathlib import Path

prompt = sys.stdin.read()
record = Path(os.environ["STEER_RECORD"])
with record.open("a", encoding="utf-8") as handle:
    handle.write(json.dumps({"prompt": prompt}) + "\n")
if len(record.read_text(encoding="utf-8").splitlines()) == 1:
    ready = Path(os.environ["STEER_READY"])
    ready.touch()
    go = ready.with_name(ready.name + ".go")
    for _ in range(6000):  # the test touches it; bounded so a broken test cannot hang it
        if go.exists():
            break
        time.sleep(0.02)
    sys.stderr.write("service unavailable, try again\n")
    sys.exit(1)
print(json.dumps({"output": "done", "usage": {"input_tokens": 3, "output_tokens": 1}}))
