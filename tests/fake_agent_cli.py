"""A stand-in for the ``claude`` and ``codex`` command-line agents, for tests.

It is a real program run as a subprocess: it reads the prompt from stdin, checks the command
line Tether built against the spec in ``$FAKE_CLI_SPEC`` (a JSON file), optionally talks to the
``tether mcp`` server it was told about (through the official MCP SDK, as the real CLIs do),
then prints a captured output file byte for byte, writes the captured stderr and exits with the
captured status. It records what it received in ``record`` for the test to inspect.

Spec keys: ``stdout`` (file to print), ``exit`` (status), ``stderr`` (text), ``expect`` (lists of
arguments that must appear contiguously in argv), ``forbid`` (arguments that must not appear),
``record`` (where to write ``{"argv", "stdin"}``), ``pause_after`` and ``wait_for`` (print that
many lines, then wait until the file ``wait_for`` exists), ``mcp_calls`` (tool calls to make
through the MCP server named by ``--mcp-config`` or ``-c mcp_servers.tether.*``; the results go
to ``mcp_results``), ``repeat_line`` (print the first line this many extra times first),
``sequence`` (a list of spec overrides, one per invocation, counted in the file ``counter``;
``record`` then gets one file per invocation, suffixed ``.1``, ``.2``...), ``on_sigterm`` (a file
to which a SIGTERM writes how many stdout lines were printed; the program then exits, or with
``ignore_sigterm`` keeps going until SIGKILL), ``pipe_size`` (shrink the stdout pipe to that
many bytes, so the program cannot print far ahead of its reader), ``pace_by_database`` (a
workspace's tether.db: before each new API message, wait until Tether has recorded a call for
every message printed so far, as a real CLI's model calls outlast Tether's reading),
``rollout`` (a Codex rollout file to write, as Codex does, under
``$CODEX_HOME/sessions/YYYY/MM/DD/`` of today with the name ``rollout_name``; ``rollout_zst``
compresses it), ``codex_approval`` (with
``mcp_calls``: decide each call as current ``codex exec`` does from the tool's annotations,
cancelling a gated one, and print its ``mcp_tool_call`` items before the captured output).
A check that fails prints ``fake CLI: ...`` on stderr and exits 97.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import sqlite3
import sys
import time
from typing import Any


def fail(message: str) -> None:
    sys.stderr.write(f"fake CLI: {message}\n")
    sys.exit(97)


def contains(argv: list[str], part: list[str]) -> bool:
    return any(argv[i : i + len(part)] == part for i in range(len(argv) - len(part) + 1))


def server_from(argv: list[str]) -> tuple[str, list[str]]:
    """The tether MCP server's command and args, from Claude's or Codex's flags."""
    if "--mcp-config" in argv:
        config = json.loads(argv[argv.index("--mcp-config") + 1])
        entry = config["mcpServers"]["tether"]
        return entry["command"], entry["args"]
    command, args = None, None
    for i, arg in enumerate(argv):
        if arg == "-c" and argv[i + 1].startswith("mcp_servers.tether.command="):
            command = json.loads(argv[i + 1].split("=", 1)[1])
        if arg == "-c" and argv[i + 1].startswith("mcp_servers.tether.args="):
            args = json.loads(argv[i + 1].split("=", 1)[1])
    if command is None or args is None:
        fail("no tether MCP server on the command line")
    return str(command), list(args or [])


def requires_approval(annotations: Any) -> bool:
    """Codex's rule (codex-rs core/src/mcp_tool_call.rs, ``requires_mcp_tool_approval``, in
    the default ``auto`` mode): destructive -> ask; read-only -> run; otherwise ask unless the
    tool says it is neither destructive nor open-world."""
    hints = annotations or {}
    destructive = hints.get("destructiveHint")
    if destructive is True:
        return True
    if hints.get("readOnlyHint"):
        return False
    open_world = hints.get("openWorldHint")
    return (destructive if destructive is not None else True) or (
        open_world if open_world is not None else True
    )


async def call_tools(
    argv: list[str], calls: list[dict[str, Any]], approval: bool = False
) -> list[Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command, args = server_from(argv)
    results = []
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        names = sorted(t.name for t in listed.tools)
        hints = {
            t.name: t.annotations.model_dump(by_alias=True) if t.annotations else None
            for t in listed.tools
        }
        for call in calls:
            if approval and requires_approval(hints.get(call["tool"])):
                # exec mode has nobody to ask: the call is cancelled (openai/codex#16685).
                results.append({"names": names, "cancelled": True})
                continue
            result = await session.call_tool(call["tool"], call["arguments"])
            text = "".join(getattr(c, "text", "") for c in result.content)
            results.append({"names": names, "is_error": result.is_error, "text": text})
    return results


PRINTED = [0]
F_SETPIPE_SZ = 1031


def watch_sigterm(path: str, ignore: bool) -> None:
    """On SIGTERM write how many stdout lines were printed to ``path``; then exit, or (with
    ``ignore``) keep going so that only SIGKILL ends the program."""

    def handler(signum: int, frame: Any) -> None:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"SIGTERM after {PRINTED[0]} lines\n")
        if not ignore:
            os._exit(143)

    signal.signal(signal.SIGTERM, handler)


def pace(database: str, line: bytes, messages: set[str]) -> None:
    """Before a new API message, wait (bounded) until Tether has recorded a call for every
    message printed so far: a model call takes longer than Tether takes to read the last one,
    as with the real CLI, however fast the replay."""
    try:
        event = json.loads(line)
    except ValueError:
        return
    message = event.get("message") if event.get("type") == "assistant" else None
    if not isinstance(message, dict) or message.get("id") in messages:
        return
    deadline = time.monotonic() + 20
    while messages and time.monotonic() < deadline:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
            recorded = conn.execute("SELECT count(*) FROM calls WHERE kind = 'model'").fetchone()
        if recorded[0] >= len(messages):
            break
        time.sleep(0.005)
    messages.add(str(message.get("id")))


def codex_items(calls: list[dict[str, Any]], results: list[Any]) -> list[bytes]:
    """The ``mcp_tool_call`` items Codex prints for each call (exec_events.rs shapes)."""
    lines = []
    for call, result in zip(calls, results, strict=True):
        item: dict[str, Any] = {"type": "mcp_tool_call", "server": "tether", "tool": call["tool"]}
        if result.get("cancelled"):
            item.update(status="failed", error={"message": "user cancelled MCP tool call"})
        else:
            item.update(status="completed", result={"content": [{"text": result["text"]}]})
        lines.append(json.dumps({"type": "item.completed", "item": item}).encode() + b"\n")
    return lines


def write_rollout(spec: dict[str, Any]) -> None:
    """Write a rollout file where Codex writes it (today's local date under CODEX_HOME)."""
    folder = os.path.join(
        os.environ["CODEX_HOME"], "sessions", time.strftime("%Y"), time.strftime("%m"),
        time.strftime("%d"),
    )  # fmt: skip
    os.makedirs(folder, exist_ok=True)
    with open(spec["rollout"], "rb") as handle:
        data = handle.read()
    name = os.path.join(folder, spec["rollout_name"])
    if spec.get("rollout_zst"):
        import zstandard

        data, name = zstandard.ZstdCompressor().compress(data), name + ".zst"
    with open(name, "wb") as handle:
        handle.write(data)


def main() -> None:
    with open(os.environ["FAKE_CLI_SPEC"], encoding="utf-8") as handle:
        spec = json.load(handle)
    if spec.get("sequence"):
        number = 1
        if os.path.exists(spec["counter"]):
            with open(spec["counter"], encoding="utf-8") as handle:
                number = int(handle.read()) + 1
        with open(spec["counter"], "w", encoding="utf-8") as handle:
            handle.write(str(number))
        spec = {**spec, **spec["sequence"][min(number, len(spec["sequence"])) - 1]}
        if spec.get("record"):
            spec["record"] = f"{spec['record']}.{number}"
    argv = sys.argv[1:]
    prompt = sys.stdin.read()
    if spec.get("record"):
        with open(spec["record"], "w", encoding="utf-8") as handle:
            json.dump({"argv": argv, "stdin": prompt}, handle)
    for part in spec.get("expect", []):
        if not contains(argv, part):
            fail(f"expected {part} in {argv}")
    for arg in spec.get("forbid", []):
        if arg in argv or any(a.startswith(arg + "=") for a in argv):
            fail(f"did not expect {arg} in {argv}")
    if spec.get("on_sigterm"):
        watch_sigterm(spec["on_sigterm"], bool(spec.get("ignore_sigterm")))
    if spec.get("pipe_size"):
        # The smallest pipe Linux allows: the writer runs at most this far ahead of its reader.
        fcntl.fcntl(1, F_SETPIPE_SZ, int(spec["pipe_size"]))
    items: list[bytes] = []
    if spec.get("mcp_calls"):
        approval = bool(spec.get("codex_approval"))
        results = asyncio.run(call_tools(argv, spec["mcp_calls"], approval))
        with open(spec["mcp_results"], "w", encoding="utf-8") as handle:
            json.dump(results, handle)
        if approval:
            items = codex_items(spec["mcp_calls"], results)
    if spec.get("rollout"):
        write_rollout(spec)
    with open(spec["stdout"], "rb") as handle:
        data = handle.read()
    lines = data.splitlines(keepends=True)
    out = sys.stdout.buffer
    if items:
        lines = [lines[0], *items, *lines[1:]]
    for _ in range(spec.get("repeat_line", 0)):
        out.write(lines[0])
    messages: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if spec.get("pace_by_database"):
            pace(spec["pace_by_database"], line, messages)
        out.write(line)
        out.flush()
        PRINTED[0] = number
        if number == spec.get("pause_after"):
            while not os.path.exists(spec["wait_for"]):
                time.sleep(0.01)
    if spec.get("stderr"):
        sys.stderr.write(spec["stderr"])
    sys.exit(spec.get("exit", 0))


if __name__ == "__main__":
    main()
