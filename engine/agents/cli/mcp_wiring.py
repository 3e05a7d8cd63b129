"""Wiring the memory tools into an agent CLI through ``tether mcp`` (a stdio MCP server).

A task with ``tools=True`` offers ``remember`` and ``recall``; an HTTP agent passes them as
function tools, but an agent CLI runs its own tool loop. So the command agent starts the CLI
with a ``tether mcp`` server bound to the same workspace, banks, tags, byte budget, default
note status and provenance (run, node, iteration, attempt) as the engine's own tools: the
CLI's model calls ``mcp__tether__remember`` / ``mcp__tether__recall`` and the notes and
``memory.tool`` events land in the node like an HTTP agent's.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.agents.agent_tool import AgentTool

SERVER_NAME = "tether"
TOOL_NAMES = ("remember", "recall")
CLAUDE_TOOL_NAMES = tuple(f"mcp__{SERVER_NAME}__{name}" for name in TOOL_NAMES)


def tether_program() -> list[str]:
    """How to start this installation's ``tether`` command: the console script beside the
    running interpreter, else the one on PATH, else the module through this interpreter."""
    beside = Path(sys.executable).with_name("tether")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("tether")
    if found:
        return [found]
    return [sys.executable, "-m", "tui.cli.main"]


def mcp_options(tools: Sequence[AgentTool]) -> dict[str, Any] | None:
    """The ``tether mcp`` options the offered memory tools carry, or None (no memory tools)."""
    for tool in tools:
        options = tool.metadata.get("mcp")
        if tool.name in TOOL_NAMES and isinstance(options, dict):
            return options
    return None


def mcp_argv(options: dict[str, Any], attempt: int) -> list[str]:
    """The ``tether mcp`` command line serving the memory tools of one attempt."""
    argv = [*tether_program(), "mcp", "--workspace", str(options["workspace"])]
    if options.get("database_url"):
        # A team workspace: the URL without a password (libpq finds it in the passfile).
        argv += ["--database-url", str(options["database_url"])]
    for bank in options.get("banks", ()):
        argv += ["--bank", str(bank)]
    for tag in options.get("tags", ()):
        argv += ["--tag", str(tag)]
    argv += ["--budget-bytes", str(options["budget_bytes"]), "--status", str(options["status"])]
    if options.get("run"):
        argv += [
            "--run",
            str(options["run"]),
            "--node",
            str(options["node"]),
            "--iteration",
            str(options.get("iteration", 0)),
            "--attempt",
            str(attempt),
        ]
    return argv


def claude_mcp_config(argv: Sequence[str]) -> dict[str, Any]:
    """The ``--mcp-config`` document naming the ``tether`` stdio server."""
    return {
        "mcpServers": {SERVER_NAME: {"type": "stdio", "command": argv[0], "args": list(argv[1:])}}
    }
