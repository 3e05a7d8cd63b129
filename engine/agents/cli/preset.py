"""What a command agent's preset decides, so each agent CLI's behaviour lives in one place: the
program it starts by default, the settings only it takes, whether the CLI takes the output
schema and the memory tools itself, the command line of one invocation, and how that
invocation's output is read (:class:`OutputReader`).

The presets: ``claude-code`` (:mod:`engine.agents.cli.claude_code`), ``codex``
(:mod:`engine.agents.cli.codex`), and the generic ``json`` and ``text``
(:mod:`engine.agents.cli.plain_presets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engine.agents.agent import AgentError, AgentRequest, ModelCall
from engine.agents.cli.outcome import Outcome, exit_words


class CommandSettings(Protocol):
    """The settings of a command agent that presets read (those of
    :class:`~engine.agents.cli.command.CommandAgent`)."""

    command: list[str]
    env: dict[str, str]
    model: str | None
    extra_args: list[str]
    max_turns: int | None
    permission_mode: str | None
    allowed_tools: list[str]
    disallowed_tools: list[str]
    sandbox: str | None
    skip_git_repo_check: bool
    max_answer_bytes: int


@dataclass(frozen=True)
class Invocation:
    """One start of the program: the attempt's request, its artifact folder, the
    ``tether mcp`` command line serving the attempt's memory tools (when it offers them), and
    the session it continues (None: a fresh one)."""

    request: AgentRequest
    folder: Path | None = None
    mcp_server: Sequence[str] | None = None
    resume_session: str | None = None


class OutputReader:
    """Reads one invocation's output as it comes: each complete stdout line, the raw stdout
    chunks (kept only by a preset whose answer is stdout itself), then the end."""

    def feed(self, line: str, now_ms: int) -> list[ModelCall]:
        """Take one stdout line; return the calls it completed, to be recorded now."""
        return []

    def take_chunk(self, chunk: bytes) -> None:
        """Take a raw stdout chunk (ignored unless the answer is stdout itself)."""

    def stop_reason(self) -> str | None:
        """Why the program must be stopped now (its answer can no longer be used), or None."""
        return None

    def pending_calls(self) -> list[ModelCall]:
        """Calls shown before the process was stopped and not recorded yet."""
        return []

    def finish(self, returncode: int, stderr_tail: str, now_ms: int) -> Outcome:
        """The outcome once the process has exited."""
        raise NotImplementedError


class Preset:
    """One agent CLI's behaviour; each preset is a subclass (see the module docstring)."""

    name = ""
    default_program: tuple[str, ...] = ()
    """The program started when the agent names none (empty: the preset needs a command)."""
    own_settings: tuple[str, ...] = ()
    """Settings only this preset takes; an agent of another preset refuses them."""
    unset: tuple[Any, ...] = (None,)
    """What one of :attr:`own_settings` holds when it was not given."""
    takes_schema_and_tools = False
    """The CLI takes the output schema natively and the memory tools over MCP."""
    resumes_sessions = False
    takes_steers = False
    """Takes a person's message mid-run (Claude Code's stream-json input)."""
    """The CLI can continue a session by its id (a retry then costs only the new turns)."""

    def argv(self, agent: CommandSettings, invocation: Invocation) -> list[str]:
        """The command line of one invocation (the prompt goes to stdin)."""
        return [*agent.command, *agent.extra_args]

    def reader(self, agent: CommandSettings, request: AgentRequest) -> OutputReader:
        """What reads one invocation's output (made before the program starts)."""
        raise NotImplementedError

    def refusal(self, agent: CommandSettings, output_schema: dict[str, Any] | None) -> str | None:
        """Why this CLI cannot take a task with ``output_schema`` (one sentence, checked
        before the run starts), or None."""
        return None


def exit_error(program: str, returncode: int, stderr_tail: str) -> Outcome:
    """A program that exited with a non-zero status, saying the end of what it printed."""
    return Outcome(
        error=AgentError(
            (f"{program} exited with status {returncode}" if returncode >= 0
             else f"{program} was {exit_words(returncode)}")
            + (f": {stderr_tail}" if stderr_tail else "")
        )
    )
