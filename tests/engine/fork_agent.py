"""The counting agent of the fork tests: a real program run by the command agent. It appends
``{"node", "prompt"}`` to ``$COUNT_FILE`` on every invocation (so a test counts them per
node), fails when the file ``$COUNT_FILE.fail-NODE`` exists, holds while ``$COUNT_FILE.hold-NODE``
exists (after writing ``$COUNT_FILE.held-NODE``; bounded), and answers with the prompt's last
line."""

import json
import os
import sys
import time

prompt = sys.stdin.read()
node = os.environ.get("TETHER_NODE_ID", "?")
count = os.environ["COUNT_FILE"]
with open(count, "a", encoding="utf-8") as handle:
    handle.write(json.dumps({"node": node, "prompt": prompt}) + "\n")
if os.path.exists(f"{count}.hold-{node}"):
    open(f"{count}.held-{node}", "w").close()
    for _ in range(6000):  # the test removes it; bounded so a broken test cannot hang it
        if not os.path.exists(f"{count}.hold-{node}"):
            break
        time.sleep(0.02)
if os.path.exists(f"{count}.fail-{node}"):
    sys.stderr.write(f"{node} was told to fail\n")
    sys.exit(1)
last = prompt.strip().splitlines()[-1] if prompt.strip() else ""
print(json.dumps({"output": {"text": f"done: {last[:80]}"},
                  "usage": {"input_tokens": 20, "output_tokens": 4}, "model": "fork-model"}))
