"""The ``claude-code`` preset: what Tether passes to Claude Code and how it reads the session.

The program is ``claude`` unless the agent names another (``command``); the preset alone
takes ``max_turns``, ``permission_mode``, ``allowed_tools`` and ``disallowed_tools``, and
Claude Code takes the output schema (``--json-schema``) and the memory tools (over MCP).

Command line: ``claude -p --output-format stream-json --verbose`` plus, from the agent's
settings, ``--model``, ``--max-turns``, ``--permission-mode``, ``--allowedTools``,
``--disallowedTools`` and any ``extra_args``; ``--json-schema SCHEMA`` when the task has an
output model; ``--resume=SESSION`` for a repair turn or a retry after a transient failure (the
same session continues instead of starting from nothing); ``--max-budget-usd`` when a dollar
budget applies (Claude Code's own cap, a second line of defence behind Tether's); ``--mcp-config``
and the two ``mcp__tether__*`` tools when the task offers memory tools. The prompt goes to
stdin.

Reading the session is :mod:`engine.agents.cli.claude_session`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.agents.agent import AgentRequest
from engine.agents.cli.claude_session import ClaudeSession
from engine.agents.cli.mcp_wiring import CLAUDE_TOOL_NAMES, claude_mcp_config
from engine.agents.cli.preset import CommandSettings, Invocation, OutputReader, Preset

PROTOCOL_ARGS = ["-p", "--output-format", "stream-json", "--verbose"]


@dataclass(frozen=True)
class ClaudeSettings:
    """The agent settings that become Claude Code flags (see the module docstring)."""

    model: str | None = None
    max_turns: int | None = None
    permission_mode: str | None = None
    allowed_tools: Sequence[str] = ()
    disallowed_tools: Sequence[str] = ()
    extra_args: Sequence[str] = ()


def claude_argv(
    program: Sequence[str],
    settings: ClaudeSettings,
    *,
    schema: dict[str, Any] | None = None,
    resume_session: str | None = None,
    mcp_config: dict[str, Any] | None = None,
    mcp_tools: Sequence[str] = (),
    max_budget_usd: float | None = None,
) -> list[str]:
    """The full command line for one invocation (the prompt goes to stdin)."""
    argv = [*program, *PROTOCOL_ARGS]
    if settings.model:
        argv += ["--model", settings.model]
    if settings.max_turns is not None:
        argv += ["--max-turns", str(settings.max_turns)]
    if settings.permission_mode:
        argv += ["--permission-mode", settings.permission_mode]
    allowed = [*settings.allowed_tools, *mcp_tools]
    if allowed:
        argv += ["--allowedTools", ",".join(allowed)]
    if settings.disallowed_tools:
        argv += ["--disallowedTools", ",".join(settings.disallowed_tools)]
    if mcp_config is not None:
        argv += ["--mcp-config", json.dumps(mcp_config, separators=(",", ":"))]
    if schema is not None:
        argv += ["--json-schema", json.dumps(schema, separators=(",", ":"))]
    if max_budget_usd is not None:
        argv += ["--max-budget-usd", f"{max(0.0, max_budget_usd):.4f}"]
    if resume_session:
        # The equals form: the CLI declares --resume with an optional value, so a dash-leading
        # id would not bind to it in the two-token form (claude-agent-sdk-python).
        argv.append(f"--resume={resume_session}")
    argv += list(settings.extra_args)
    return argv


class ClaudeCodePreset(Preset):
    """The ``claude-code`` preset (see the module docstring)."""

    name = "claude-code"
    default_program = ("claude",)
    own_settings = ("max_turns", "permission_mode", "allowed_tools", "disallowed_tools")
    unset = (None, [])
    takes_schema_and_tools = True
    resumes_sessions = True
    takes_steers = True

    def argv(self, agent: CommandSettings, invocation: Invocation) -> list[str]:
        request, mcp_server = invocation.request, invocation.mcp_server
        settings = ClaudeSettings(
            agent.model,
            agent.max_turns,
            agent.permission_mode,
            agent.allowed_tools,
            agent.disallowed_tools,
            agent.extra_args,
        )
        return claude_argv(
            agent.command,
            settings,
            schema=request.output_schema,
            resume_session=invocation.resume_session,
            mcp_config=claude_mcp_config(mcp_server) if mcp_server else None,
            mcp_tools=CLAUDE_TOOL_NAMES if mcp_server else (),
            max_budget_usd=request.max_budget_usd,
        )

    def reader(self, agent: CommandSettings, request: AgentRequest) -> OutputReader:
        return ClaudeSession(request.prices)
