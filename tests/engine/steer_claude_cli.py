"""A stand-in for ``claude -p --input-format stream-json --output-format stream-json``, for
the steer tests: a real program that reads user messages (stream-json) from stdin, records
each one in ``$STEER_RECORD`` with whether a turn was under way when it arrived, and answers
every message with a turn (an assistant message, then a ``result``), taking a message that
arrives mid-turn when that turn ends, as Claude Code does. It exits when stdin closes.

Turn 1 starts with the prompt and stays open, after writing the file ``$STEER_READY``,
until ``$STEER_EXPECT`` more messages (default 1) arrived or the file ``$STEER_READY.go``
exists; so a test can send steers while the turn is under way, or let it end without one.
"""

import json
import os
import select
import sys
from pathlib import Path

argv = sys.argv[1:]
for flag in (["--input-format", "stream-json"], ["--output-format", "stream-json"]):
    if not any(argv[i:i + 2] == flag for i in range(len(argv))):
        sys.stderr.write(f"fake claude: {' '.join(flag)} missing from {argv}\n")
        sys.exit(97)
READY = Path(os.environ["STEER_READY"])
RECORD = Path(os.environ["STEER_RECORD"])
SESSION = "5e55e55e-0000-4000-8000-000000000001"
USAGE = {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
         "output_tokens": 5, "service_tier": "standard"}


_pending = bytearray()


def read_line(timeout: float | None = None) -> str | None:
    """The next stdin line ('' at its end; None when ``timeout`` passed first). Read from
    the descriptor with a buffer of its own: select() cannot see what a text stream holds."""
    while b"\n" not in _pending:
        readable, _, _ = select.select([0], [], [], timeout)
        if not readable:
            return None
        chunk = os.read(0, 65536)
        if not chunk:
            line = _pending.decode()
            _pending.clear()
            return line
        _pending.extend(chunk)
    end = _pending.index(b"\n") + 1
    line = _pending[:end].decode()
    del _pending[:end]
    return line


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def text_of(line: str) -> str:
    message = json.loads(line)
    assert message["type"] == "user", message
    return "".join(part["text"] for part in message["message"]["content"])


def record(text: str, turn_open: bool) -> None:
    with RECORD.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"message": text, "turn_open": turn_open}) + "\n")


def turn(number: int, said: str, last: bool) -> None:
    emit({"type": "assistant", "session_id": SESSION, "message": {
        "id": f"msg_{number:04d}", "model": "claude-sonnet-4-5-20250929", "role": "assistant",
        "content": [{"type": "text", "text": said}], "usage": USAGE}})
    emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": number,
          "result": said, "session_id": SESSION, "total_cost_usd": 0.001 * number,
          "usage": USAGE})


emit({"type": "system", "subtype": "init", "session_id": SESSION,
      "model": "claude-sonnet-4-5-20250929", "tools": [], "mcp_servers": []})
waiting = [text_of(read_line() or "")]
record(waiting[0], False)
emit({"type": "assistant", "session_id": SESSION, "message": {
    "id": "msg_0000", "model": "claude-sonnet-4-5-20250929", "role": "assistant",
    "content": [{"type": "text", "text": "Working on it."}], "usage": USAGE}})
READY.touch()
go = READY.with_name(READY.name + ".go")
expect = 1 + int(os.environ.get("STEER_EXPECT", "1"))
while not go.exists() and len(waiting) < expect:
    line = read_line(0.05)
    if line == "":
        break
    if line is not None:
        waiting.append(text_of(line))
        record(waiting[-1], True)
number = 0
while waiting:
    number += 1
    text = waiting.pop(0)
    turn(number, f"turn {number} answered: {text}", not waiting)
    if not waiting:
        line = read_line()  # the next message, or the end of stdin
        if line:
            waiting.append(text_of(line))
            record(waiting[-1], False)
