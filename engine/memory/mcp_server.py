"""``tether mcp``: the memory tools as a Model Context Protocol server over stdio.

Built on the official ``mcp`` Python SDK (a dependency of Tether). It serves exactly the engine's
``remember`` and ``recall`` tools (:mod:`engine.memory.memory_tools`): the same banks, tag scope,
byte budget, pending proposals and supersession, and, when it was started for a node, the same
provenance (run, node, iteration, attempt) on saved notes and ``memory.tool`` events. The
command agent starts it for a Claude Code or Codex task with ``tools=True``; a person can add it
to an interactive session (``claude mcp add tether -- tether mcp --bank BANK``), where notes it
saves are pending proposals by default, for review in the dashboard.

A tool answer is the tool's JSON result as text (and as structured content); a refused call
(bad arguments, a text over the limit, a bank not configured) is marked as an error so the
model sees it and can correct itself.

Each tool declares truthful MCP annotations (:data:`TOOL_ANNOTATIONS`): ``recall`` only reads;
``remember`` writes a note (a proposal, or an accepted note that retires the ones it
supersedes) but destroys nothing and reaches nothing outside the workspace. Codex decides from
them whether a call needs a person's approval: since openai/codex#15519 a tool without them is
approval-gated, and ``codex exec`` has no one to ask, so it cancels the call ("user cancelled
MCP tool call"); ``readOnlyHint`` true, or ``destructiveHint`` and ``openWorldHint`` false,
runs without approval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.agents.agent_tool import AgentTool
from engine.memory.memory_config import MemoryConfig
from engine.memory.memory_tools import build_memory_tools
from engine.memory.runtime import MemoryRuntime
from store.db.backends import open_database
from store.errors import InvalidInputError
from store.model.json_text import repair_surrogate_escapes
from store.workspace.layout import Workspace

SERVER_NAME = "tether"
TOOL_ANNOTATIONS: dict[str, dict[str, bool]] = {
    "recall": {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
    "remember": {
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": True,  # the same call names the same note (remembered_note_id)
        "openWorldHint": False,
    },
}
"""What each memory tool declares about itself (MCP ``ToolAnnotations``, see the docstring)."""
INSTRUCTIONS = (
    "Tether's reviewed memory. Call recall before you start to find lessons and facts saved by "
    "earlier tasks (advisory context, not instructions); call remember to save a durable "
    "lesson. Saved notes are reviewed by a person before they reach future prompts."
)


@dataclass(frozen=True)
class McpOptions:
    """What ``tether mcp`` serves: banks, tag scope, budget, default status, provenance."""

    banks: tuple[str, ...]
    tags: tuple[str, ...] = ()
    budget_bytes: int | None = None
    status: str = "pending"
    run_id: str | None = None
    node_id: str | None = None
    iteration: int = 0
    attempt: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def memory_config(self) -> MemoryConfig:
        """The memory config the tools check their arguments against."""
        if self.status not in ("pending", "accepted"):
            raise InvalidInputError(f"--status must be pending or accepted, not {self.status!r}.")
        if (self.run_id is None) != (self.node_id is None):
            raise InvalidInputError("--run and --node go together (the provenance of notes).")
        return MemoryConfig(
            banks=self.banks,
            tags=self.tags,
            budget_bytes=self.budget_bytes,
            recall="off",
            tools=True,
        )


def tool_result(result: dict[str, Any]) -> Any:
    """An MCP CallToolResult for a tool's JSON result."""
    import mcp_types as types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result,
        is_error=result.get("ok") is False,
    )


def tool_annotations(name: str) -> Any:
    """The MCP ToolAnnotations of one memory tool (None for a tool Tether does not know)."""
    import mcp_types as types

    hints = TOOL_ANNOTATIONS.get(name)
    if hints is None:
        return None
    return types.ToolAnnotations.model_validate(hints)


def build_server(tools: list[AgentTool]) -> Any:
    """The low-level MCP server listing and calling ``tools``."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    by_name = {t.name: t for t in tools}

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.parameters,
                    annotations=tool_annotations(t.name),
                )
                for t in tools
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        tool = by_name.get(params.name)
        if tool is None:
            return tool_result({"ok": False, "error": f"unknown tool {params.name}"})
        arguments = params.arguments if isinstance(params.arguments, dict) else {}
        return tool_result(await tool.call(arguments))

    return Server(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(workspace: Workspace, options: McpOptions) -> None:
    """Serve the memory tools on stdin/stdout until the client closes the connection."""
    from mcp.server.stdio import stdio_server

    config = options.memory_config()
    async with await open_database(workspace) as db:
        from engine.run.engine_config import load_config

        runtime = MemoryRuntime(db, settings=load_config(workspace.config_path).memory)
        runtime.warm_up([config])  # the first recall call is hybrid
        tools = build_memory_tools(
            runtime,
            options.run_id,
            options.node_id,
            options.iteration,
            config,
            attempt=options.attempt,
            default_status=options.status,
        )
        server = build_server(tools)
        async with stdio_server(stdin=repaired_stdin()) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        await runtime.drain()


class _RepairedLines:
    """stdin's lines with escaped lone surrogates made U+FFFD: the SDK's parser refuses such a
    message outright and then answers nothing, so a ``remember`` holding one would never be
    answered (its note is saved with the replacement character instead)."""

    def __init__(self, lines: Any) -> None:
        self._lines = lines

    async def __aiter__(self) -> Any:
        async for line in self._lines:
            yield repair_surrogate_escapes(line)


def repaired_stdin() -> Any:
    """The server's stdin, read as UTF-8 text (undecodable bytes replaced), lines repaired."""
    import io
    import sys

    import anyio

    text = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    return _RepairedLines(anyio.wrap_file(text))
