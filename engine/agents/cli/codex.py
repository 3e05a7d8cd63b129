"""The ``codex`` preset: what Tether passes to Codex and how it reads ``codex exec --json``.

The program is ``codex`` unless the agent names another (``command``); the preset alone takes
``sandbox`` and ``skip_git_repo_check``, and Codex takes the output schema and the memory tools
(over MCP).

Command line: ``codex exec --json`` (``codex exec resume --json … THREAD -`` to continue a
thread: a retry after a transient failure) plus, from the agent's settings, ``-m MODEL``,
``--sandbox MODE``, ``--skip-git-repo-check`` (when ``skip_git_repo_check = true``) and any
``extra_args``; ``--output-schema FILE`` when the task has an output model (the schema is
written into the attempt's artifact folder); ``-c mcp_servers.tether.command=…`` and
``-c mcp_servers.tether.args=…`` when the task offers memory tools; then ``-`` (the prompt
is read from stdin).

Reading the JSON lines (:class:`CodexSession`):

* ``turn.completed`` ends a turn with ``usage``: ``input_tokens`` *includes*
  ``cached_input_tokens`` (and ``cache_write_input_tokens`` when reported), so fresh input is
  the difference; ``output_tokens`` *includes* ``reasoning_output_tokens``, so the output lane
  is the difference and nothing is counted twice. The counts are thread totals: a second turn in
  the same process is recorded as the growth since the first. Each turn is recorded as soon as
  it completes.
* The answer is the last ``agent_message`` item.
* An ``error`` event saying "Reconnecting…" is a retry notice: it fails nothing when the turn
  then completes (it is counted in the attempt's details). ``turn.failed``, or an ``error``
  event with no completed turn after it, fails the attempt with Codex's own message (the JSON
  error inside it is unwrapped), classified permanent (unsupported model, bad request, budget
  or quota) or transient (rate limit, disconnect). A non-zero exit is read the same way; its
  stderr is the reason only when the events give none. ``error`` *items* are warnings.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.agents.agent import AgentError, AgentRequest, AgentResult, ModelCall, failure_error
from engine.agents.cli.outcome import Outcome, json_values
from engine.agents.cli.preset import CommandSettings, Invocation, OutputReader, Preset
from engine.agents.failures import classify
from engine.agents.reported_usage import token_count
from engine.agents.reset_times import reset_at_ms
from engine.structured import strict_schema
from store.model.token_lanes import TokenUsage

PROTOCOL_ARGS = ["exec", "--json"]
SCHEMA_FILE = "output-schema.json"
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")
SOURCE = "Codex"


@dataclass(frozen=True)
class CodexSettings:
    """The agent settings that become Codex flags (see the module docstring)."""

    model: str | None = None
    sandbox: str | None = None
    skip_git_repo_check: bool = False
    extra_args: Sequence[str] = ()


def _toml_string(text: str) -> str:
    # A JSON string literal is a valid TOML basic string (same escapes).
    return json.dumps(text)


def codex_argv(
    program: Sequence[str],
    settings: CodexSettings,
    *,
    schema_file: Path | None = None,
    mcp_command: Sequence[str] = (),
    resume_session: str | None = None,
) -> list[str]:
    """The full command line for one invocation (the prompt goes to stdin).

    ``resume_session`` continues that thread: ``codex exec resume [OPTIONS] ID -``. ``exec
    resume`` takes neither ``--sandbox`` nor ``--cd`` nor ``--color`` (codex 0.153), so the
    sandbox goes as ``-c sandbox_mode="…"``."""
    argv = [*program, "exec", "resume", "--json"] if resume_session else [
        *program, *PROTOCOL_ARGS]
    if settings.model:
        argv += ["-m", settings.model]
    if settings.sandbox and resume_session:
        argv += ["-c", f"sandbox_mode={_toml_string(settings.sandbox)}"]
    elif settings.sandbox:
        argv += ["--sandbox", settings.sandbox]
    if settings.skip_git_repo_check:
        argv.append("--skip-git-repo-check")
    if schema_file is not None:
        argv += ["--output-schema", str(schema_file)]
    if mcp_command:
        args = "[" + ", ".join(_toml_string(a) for a in mcp_command[1:]) + "]"
        argv += [
            "-c",
            f"mcp_servers.tether.command={_toml_string(mcp_command[0])}",
            "-c",
            f"mcp_servers.tether.args={args}",
        ]
    argv += list(settings.extra_args)
    if resume_session:
        argv.append(resume_session)
    argv.append("-")
    return argv


def turn_usage(usage: Any) -> TokenUsage:
    """A ``turn.completed`` usage object as lanes (see the module docstring)."""
    total_input = token_count(usage, "input_tokens", SOURCE)
    cached = token_count(usage, "cached_input_tokens", SOURCE)
    written = token_count(usage, "cache_write_input_tokens", SOURCE)
    output = token_count(usage, "output_tokens", SOURCE)
    reasoning = min(output, token_count(usage, "reasoning_output_tokens", SOURCE))
    return TokenUsage(
        input=max(0, total_input - cached - written),
        cache_read=cached,
        cache_write=written,
        output=output - reasoning,
        reasoning=reasoning,
    )


def _growth(now: TokenUsage, before: TokenUsage) -> TokenUsage:
    lanes = list(zip(now, before, strict=True))
    if all(a >= b for a, b in lanes):
        return TokenUsage(*(a - b for a, b in lanes))
    return now  # not a running total after all: take the turn as reported


def error_text(message: Any) -> tuple[str, int | None]:
    """Codex's error message with the provider's JSON error unwrapped, and its HTTP status."""
    text = str(message or "").strip()
    status: int | None = None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return text, None
        if isinstance(data, dict):
            raw_status = data.get("status")
            if isinstance(raw_status, int) and not isinstance(raw_status, bool):
                status = raw_status
            inner = data.get("error")
            if isinstance(inner, dict) and inner.get("message"):
                kind = inner.get("type")
                text = f"{inner['message']}" + (f" ({kind})" if kind else "")
    return text, status


class CodexSession(OutputReader):
    """Reads one ``codex exec --json`` invocation line by line (see the module docstring)."""

    def __init__(self, model: str | None = None) -> None:
        self.model = model
        self.thread_id: str | None = None
        self.text = ""
        self.turns = 0
        self.reconnects = 0
        self.warnings: list[str] = []
        self.pending_error: tuple[str, int | None] | None = None
        self.failed: tuple[str, int | None] | None = None
        self._total = TokenUsage()
        self._turn_started_ms: int | None = None

    def feed(self, line: str, now_ms: int) -> list[ModelCall]:
        """Take one stdout line; returns the calls it completes (one per completed turn)."""
        calls = []
        for event in json_values(line):
            call = self._event(event, now_ms)
            if call is not None:
                calls.append(call)
        return calls

    def _event(self, event: dict[str, Any], now_ms: int) -> ModelCall | None:
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.thread_id = event["thread_id"]
        elif kind == "turn.started":
            self._turn_started_ms = now_ms
        elif kind == "item.completed":
            item = event.get("item")
            if isinstance(item, dict):
                if item.get("type") in ("agent_message", "assistant_message"):
                    self.text = str(item.get("text") or "")
                elif item.get("type") == "error":
                    self.warnings.append(str(item.get("message") or "")[:300])
        elif kind == "error":
            message = str(event.get("message") or "")
            if message.lower().startswith("reconnecting"):
                self.reconnects += 1
            else:
                self.pending_error = error_text(message)
        elif kind == "turn.failed":
            error = event.get("error")
            self.failed = error_text(error.get("message") if isinstance(error, dict) else error)
        elif kind == "turn.completed":
            return self._turn(event.get("usage"), now_ms)
        return None

    def _turn(self, usage: Any, now_ms: int) -> ModelCall:
        reported = turn_usage(usage)
        call_usage = _growth(reported, self._total)
        self._total = reported
        self.turns += 1
        self.pending_error = None  # an error before a turn that completed was not fatal
        started = self._turn_started_ms if self._turn_started_ms is not None else now_ms
        return ModelCall(call_usage, self.model, started, now_ms, detail={"turn": self.turns})

    def details(self) -> dict[str, Any]:
        """What this invocation reported about itself (stored with the attempt)."""
        info: dict[str, Any] = {"thread_id": self.thread_id, "turns": self.turns}
        if self.reconnects:
            info["reconnects"] = self.reconnects
        if self.warnings:
            info["warnings"] = self.warnings[:5]
        return info

    def finish(self, returncode: int, stderr_tail: str, now_ms: int) -> Outcome:
        """The outcome once the process has exited (calls were already returned by feed)."""
        failure = self.failed or self.pending_error
        if failure is None and returncode != 0:
            failure = (stderr_tail or f"exit status {returncode} with no error event", None)
        if failure is not None:
            message, status = failure
            kind = classify(message, status)
            return Outcome(
                error=failure_error(
                    f"Codex failed (exit status {returncode}): {message[:600]}",
                    kind,
                    resets_at_ms=reset_at_ms(message, now_ms) if kind == "limit" else None,
                    session_id=self.thread_id,
                ),
                details=self.details(),
            )
        if not self.text.strip():
            return Outcome(
                error=AgentError(
                    "Codex finished without an answer (no agent_message)"
                    + ("" if self.turns else " and no completed turn")
                    + ".",
                    session_id=self.thread_id,
                ),
                details=self.details(),
            )
        return Outcome(
            result=AgentResult(self.text, None, self.model, self.thread_id),
            details=self.details(),
        )


class CodexPreset(Preset):
    """The ``codex`` preset (see the module docstring)."""

    name = "codex"
    default_program = ("codex",)
    own_settings = ("sandbox", "skip_git_repo_check")
    unset = (None, False)
    takes_schema_and_tools = True
    resumes_sessions = True

    def argv(self, agent: CommandSettings, invocation: Invocation) -> list[str]:
        request, folder = invocation.request, invocation.folder
        schema_file = None
        if request.output_schema is not None and folder is not None:
            # Codex reads the schema from a file: written (owner-only) into the attempt folder.
            schema_file = folder / SCHEMA_FILE
            schema = strict_schema(request.output_schema) or request.output_schema
            schema_file.write_text(json.dumps(schema, indent=2), encoding="utf-8")
            os.chmod(schema_file, 0o600)
        settings = CodexSettings(
            agent.model, agent.sandbox, agent.skip_git_repo_check, agent.extra_args
        )
        server = invocation.mcp_server or ()
        return codex_argv(
            agent.command,
            settings,
            schema_file=schema_file,
            mcp_command=server,
            resume_session=invocation.resume_session,
        )

    def reader(self, agent: CommandSettings, request: AgentRequest) -> OutputReader:
        return CodexSession(agent.model)
