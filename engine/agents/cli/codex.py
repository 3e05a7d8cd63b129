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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.agents.agent import AgentError, AgentRequest, AgentResult, ModelCall, failure_error
from engine.agents.cli.codex_items import error_warning, tool_record, tool_warning
from engine.agents.cli.codex_rollout import (
    RequestCounter,
    RolloutFile,
    codex_home,
    codex_usage,
    find_rollout,
    last_total,
    parse_line,
    raw_counts,
)
from engine.agents.cli.outcome import Outcome, exit_words, json_values
from engine.agents.cli.preset import CommandSettings, Invocation, OutputReader, Preset
from engine.agents.failures import classify
from engine.agents.reset_times import reset_at_ms
from engine.structured import strict_problem, strict_schema

PROTOCOL_ARGS = ["exec", "--json"]
SCHEMA_FILE = "output-schema.json"
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")
SOURCE = "Codex"
MAX_TOOL_RECORDS = 100
"""Tool calls kept per invocation in the attempt's details (the rest are counted)."""


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
    """Reads one ``codex exec --json`` invocation line by line (see the module docstring).

    ``home`` is the ``CODEX_HOME`` whose rollout files give one call per model request (None:
    none is read, every turn is one aggregate row); ``started_s`` is when the invocation
    started (the rollout's dated folder); ``resumed`` maps a thread this invocation continues
    to its running total before it (usage of earlier invocations, never counted again).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        home: Path | None = None,
        started_s: float | None = None,
        resumed: dict[str, dict[str, int]] | None = None,
    ) -> None:
        self.model = model
        self.home = home
        self.started_s = time.time() if started_s is None else started_s
        self.resumed = resumed or {}
        self.thread_id: str | None = None
        self.text = ""
        self.turns = 0
        self.reconnects = 0
        self.codex_warnings: list[str] = []
        self.warnings: list[str] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.tool_call_count = 0
        self.pending_error: tuple[str, int | None] | None = None
        self.failed: tuple[str, int | None] | None = None
        self.counter = RequestCounter()
        self.reported: dict[str, int] = dict(self.counter.total)
        self.rollout: RolloutFile | None = None
        self.rollout_problem: str | None = None if home is not None else "no CODEX_HOME given"
        self.aggregated_turns = 0
        self._turn_started_ms: int | None = None

    def feed(self, line: str, now_ms: int) -> list[ModelCall]:
        """Take one stdout line; returns the calls it completes (each model request the
        rollout file shows by now, or a whole turn when there is no rollout)."""
        calls: list[ModelCall] = []
        for event in json_values(line):
            calls.extend(self._event(event, now_ms))
        return calls

    def _event(self, event: dict[str, Any], now_ms: int) -> list[ModelCall]:
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.thread_id = event["thread_id"]
            floor = self.resumed.get(self.thread_id)
            if floor is not None:
                self.counter = RequestCounter(floor)
                self.reported = dict(self.counter.total)
        elif kind == "turn.started":
            self._turn_started_ms = now_ms
        elif kind == "item.completed":
            item = event.get("item")
            if isinstance(item, dict):
                self._item(item)
            return self._poll(now_ms)
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
        return []

    def _item(self, item: dict[str, Any]) -> None:
        if item.get("type") in ("agent_message", "assistant_message"):
            self.text = str(item.get("text") or "")
            return
        warning = error_warning(item)
        if warning is not None:
            self.codex_warnings.append(warning[:300])
            self.warnings.append(warning)
        record = tool_record(item)
        if record is None:
            return
        self.tool_call_count += 1
        if len(self.tool_calls) < MAX_TOOL_RECORDS:
            self.tool_calls.append(record)
        warning = tool_warning(record)
        if warning is not None:
            self.warnings.append(warning)

    # -- usage: per model request from the rollout, else per turn -------------------------

    def _open_rollout(self) -> RolloutFile | None:
        if self.rollout is not None or self.home is None or self.thread_id is None:
            return self.rollout
        path = find_rollout(self.home, self.thread_id, self.started_s)
        if path is None:
            self.rollout_problem = (
                f"no rollout file for thread {self.thread_id} under {self.home / 'sessions'}"
            )
            return None
        self.rollout, self.rollout_problem = RolloutFile(path), None
        return self.rollout

    def _poll(self, now_ms: int, final: bool = False) -> list[ModelCall]:
        """The model requests the rollout file shows beyond those already recorded."""
        rollout = self._open_rollout()
        if rollout is None:
            return []
        try:
            lines = rollout.rest() if final else rollout.new_lines()
        except OSError as error:
            self.rollout_problem = f"the rollout file {rollout.path} cannot be read: {error}"
            return []
        calls = []
        for line in lines:
            request = self.counter.feed(parse_line(line))
            if request is None:
                continue
            detail: dict[str, Any] = {"request": self.counter.requests, "turn": self.turns + 1}
            if request.context_window is not None:
                detail["context_window"] = request.context_window
            calls.append(
                ModelCall(
                    request.usage,
                    request.model or self.model,
                    request.started_ms if request.started_ms is not None else now_ms,
                    request.finished_ms if request.finished_ms is not None else now_ms,
                    detail=detail,
                )
            )
        return calls

    def _turn(self, usage: Any, now_ms: int) -> list[ModelCall]:
        reported = raw_counts(usage)
        calls = self._poll(now_ms)
        growth = {lane: reported[lane] - self.reported.get(lane, 0) for lane in reported}
        if any(value < 0 for value in growth.values()):
            growth = reported  # not a running total after all: take the turn as reported
        self.reported = reported
        self.turns += 1
        self.pending_error = None  # an error before a turn that completed was not fatal
        if self.rollout is None:
            # No per-request counts to be had: the turn is one row, kept out of the
            # per-call histogram (it is not one model call, and its size is no context).
            self.aggregated_turns += 1
            self.counter.raise_floor(reported)
            started = self._turn_started_ms if self._turn_started_ms is not None else now_ms
            reason = "Codex's usage for the whole turn (every model request in it): " + (
                self.rollout_problem or "no rollout file"
            )
            calls.append(
                self._row(growth, started, now_ms, aggregate="turn", turn=self.turns, reason=reason)
            )
        return calls

    def _row(self, raw: dict[str, int], started: int, finished: int, **detail: Any) -> ModelCall:
        """A row of usage that is not one model request (kept out of the per-call counts)."""
        model = self.counter.model or self.model
        return ModelCall(
            codex_usage(raw), model, started, finished, kind="reconciliation", detail=detail
        )

    def _beyond_requests(self, now_ms: int, notes: list[str]) -> list[ModelCall]:
        """What the turn totals hold beyond the requests the rollout showed (one row), or
        a note when the rollout showed more."""
        if self.rollout is None or not self.turns:
            return []
        beyond = {k: max(0, v - self.counter.total.get(k, 0)) for k, v in self.reported.items()}
        excess = {k: max(0, v - self.reported.get(k, 0)) for k, v in self.counter.total.items()}
        if any(excess.values()):
            notes.append(
                f"the rollout file counts {sum(excess.values()):,} more tokens than Codex's "
                "turn totals; the per-request figures are kept"
            )
        if not beyond["input_tokens"] and not beyond["output_tokens"]:
            return []
        reason = "Codex's turn totals beyond the model requests in its rollout file"
        return [self._row(beyond, now_ms, now_ms, reason=reason, requests=self.counter.requests)]

    def pending_calls(self) -> list[ModelCall]:
        """The model requests the rollout shows that were not recorded yet (the process was
        stopped: what it spent is still recorded)."""
        return self._poll(int(time.time() * 1000), final=True)

    def details(self, notes: list[str] | None = None) -> dict[str, Any]:
        """What this invocation reported about itself (stored with the attempt)."""
        info: dict[str, Any] = {"thread_id": self.thread_id, "turns": self.turns}
        if self.rollout is not None or self.counter.requests:
            # Without a rollout file the number of requests is unknown, not 0.
            info["requests"] = self.counter.requests
        if self.rollout is not None:
            info["rollout"] = str(self.rollout.path)
        if self.aggregated_turns:
            info["aggregated_turns"] = self.aggregated_turns
        if self.reconnects:
            info["reconnects"] = self.reconnects
        if self.codex_warnings:
            info["warnings"] = self.codex_warnings[:5]
        if self.tool_call_count:
            info["tool_calls"] = self.tool_calls
            if self.tool_call_count > len(self.tool_calls):
                info["tool_calls_total"] = self.tool_call_count
        notes = list(notes or [])
        if self.rollout_problem and (self.turns or self.thread_id):
            notes.append(f"no per-request usage: {self.rollout_problem}")
        if notes:
            info["notes"] = notes
        return info

    def finish(self, returncode: int, stderr_tail: str, now_ms: int) -> Outcome:
        """The outcome once the process has exited (the rollout is complete now)."""
        notes: list[str] = []
        calls = self._poll(now_ms, final=True)
        calls += self._beyond_requests(now_ms, notes)
        failure = self.failed or self.pending_error
        if failure is None and returncode != 0:
            failure = (stderr_tail or "no error event and nothing on stderr", None)
        outcome = Outcome(calls=calls, details=self.details(notes), warnings=self.warnings)
        if failure is not None:
            message, status = failure
            kind = classify(message, status)
            outcome.error = failure_error(
                f"Codex failed ({exit_words(returncode)}): {message[:600]}",
                kind,
                resets_at_ms=reset_at_ms(message, now_ms) if kind == "limit" else None,
                session_id=self.thread_id,
            )
        elif not self.text.strip():
            outcome.error = AgentError(
                "Codex finished without an answer (no agent_message)"
                + ("" if self.turns else " and no completed turn")
                + ".",
                session_id=self.thread_id,
            )
        else:
            model = self.counter.model or self.model
            outcome.result = AgentResult(self.text, None, model, self.thread_id)
        return outcome


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
            # Codex reads the schema from a file: written (owner-only) into the attempt folder,
            # in the strict form Codex sends (refusal() has ruled out the others).
            schema_file = folder / SCHEMA_FILE
            schema = strict_schema(request.output_schema)
            if schema is None:
                raise AgentError(
                    self.refusal(agent, request.output_schema) or "not strict", retryable=False
                )
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

    def refusal(self, agent: CommandSettings, output_schema: dict[str, Any] | None) -> str | None:
        """Codex sends ``--output-schema`` as strict structured output (``strict: true``:
        every object closed, every field required); a schema that cannot be strict would be
        refused by the API mid-run, so it is refused before the run."""
        if output_schema is None:
            return None
        problem = strict_problem(output_schema)
        if problem is None:
            return None
        title = output_schema.get("title") or "the output model"
        return (
            f"Codex needs a strict output schema (every field required, no free-form objects), "
            f"and {title} cannot be one: {problem}; make every field required (use "
            "Optional[...] without a default for a field that may be empty) or use another agent"
        )

    def reader(self, agent: CommandSettings, request: AgentRequest) -> OutputReader:
        home = codex_home({**os.environ, **agent.env})
        resumed: dict[str, dict[str, int]] = {}
        if request.resume_session:
            # A continued thread's rollout already holds the earlier invocations' usage.
            path = find_rollout(home, request.resume_session, time.time())
            total = last_total(path) if path is not None else None
            if total is not None:
                resumed[request.resume_session] = total
        return CodexSession(agent.model, home=home, started_s=time.time(), resumed=resumed)
