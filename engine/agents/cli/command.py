"""The command agent: runs an agent CLI (Claude Code, Codex, or any program) as a subprocess.

The prompt goes to stdin. Stdout is read in chunks and written as it arrives to the attempt's
``stream.log`` (stderr to ``stderr.log`` beside it), so the dashboard's Log tab shows tool use
live; it is split into lines with bounded memory (:mod:`engine.agents.cli.lines`: a line of any
length is fine, the full output exists once, in the log) and each line goes to the preset's
reader as it comes. What differs between agent CLIs is the preset's alone
(:mod:`engine.agents.cli.preset`):

* ``claude-code`` — see :mod:`engine.agents.cli.claude_code` (stream-json, one call per API
  message, reconciled with ``modelUsage``, cost from Claude Code).
* ``codex`` — see :mod:`engine.agents.cli.codex` (``codex exec --json``, one call per turn).
* ``json`` and ``text`` — see :mod:`engine.agents.cli.plain_presets` (the last JSON line with
  its usage; stdout as the answer).

``command`` is the program to start (default ``claude`` / ``codex`` for those presets; give a
path or a wrapper such as ``["npx", "@anthropic-ai/claude-code"]``); the preset adds its own
arguments and the flags built from the agent's settings (``model``, ``max_turns``,
``permission_mode``, ``allowed_tools``, ``disallowed_tools``, ``sandbox``,
``skip_git_repo_check``, ``extra_args``). The command line of every invocation is stored with
the attempt (``tether node`` shows it).

The process runs in its own session (process group); on timeout or cancel the whole group gets
SIGTERM, then SIGKILL after ``kill_grace_s``, so no grandchild outlives the attempt. Calls the
session had shown before it was stopped are still recorded. When the engine's process dies
without stopping it (kill -9), its watchdog kills the group
(:mod:`engine.agents.cli.group_watchdog`).

Bounds: the program starts with a short environment, never the workspace database's
credentials (:mod:`engine.agents.cli.agent_env`; ``pass_env`` and ``env`` add to it); each log
keeps at most ``max_log_bytes`` (:mod:`engine.agents.cli.bounded_log`, secrets masked); and a
program that prints more than ``max_output_bytes`` (or, for the ``text`` preset, more than its
answer may hold, ``max_answer_bytes``) is stopped there and the attempt fails for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.agents.agent import AgentError, AgentRequest, AgentResult
from engine.agents.cli.agent_env import agent_environment, check_agent_variables
from engine.agents.cli.bounded_log import DEFAULT_MAX_LOG_BYTES, BoundedLog
from engine.agents.cli.claude_code import ClaudeCodePreset
from engine.agents.cli.codex import SANDBOX_MODES, CodexPreset
from engine.agents.cli.group_watchdog import WATCHDOG
from engine.agents.cli.lines import DEFAULT_MAX_LINE_BYTES, LineSplitter, TailBuffer
from engine.agents.cli.mcp_wiring import mcp_argv, mcp_options
from engine.agents.cli.plain_presets import JsonPreset, TextPreset
from engine.agents.cli.preset import Invocation, OutputReader, Preset
from engine.agents.cli.stream_input import INPUT_ARGS, Turns, converse
from engine.agents.failures import resume_failed
from store.model.wording import plural

PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (ClaudeCodePreset(), CodexPreset(), JsonPreset(), TextPreset())
}
READ_CHUNK = 64 * 1024
STREAM_LIMIT = 4096
"""Bytes of stdout asyncio buffers ahead of the reader before it stops reading the pipe."""
DRAIN_WAIT_S = 2.0
"""How long a killed process's last output may take to arrive (its pipes close at its end)."""
DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024 * 1024
"""A program that prints more than this is stopped: no agent answers with a quarter gigabyte,
and its log keeps only the first max_log_bytes anyway."""
_WORD = re.compile(r"^[A-Za-z][A-Za-z-]*$")


def _string_list(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return list(value)


def _shown(argv: Sequence[str], limit: int = 300) -> list[str]:
    """The command line as stored with the attempt (very long arguments shortened)."""
    return [a if len(a) <= limit else a[:limit] + f"…({len(a)} chars)" for a in argv]


class _Lines:
    """Routes one invocation's stdout to its preset's reader: raw chunks, and lines of bounded
    length (a longer one is counted, never parsed)."""

    def __init__(self, reader: OutputReader, request: AgentRequest,
                 turns: Turns | None = None) -> None:
        self.reader = reader
        self.request = request
        self.long_lines = 0
        self.turns = turns
        """Turns ended so far, when the prompt goes in as stream-json (steers may follow)."""

    async def line(self, text: str, truncated: bool) -> None:
        if self.turns is not None and not truncated:
            self.turns.saw(text)
        if truncated:
            # Never parsed (memory stays bounded); the whole line is in stream.log.
            self.long_lines += 1
            return
        for call in self.reader.feed(text, self.request.clock.now_ms()):
            await self.request.on_call(call)
            # A real pause after each call: a stop the engine decided on it (a budget) lands
            # here, not after every line already buffered has been read.
            await asyncio.sleep(0)


@dataclass
class CommandAgent:
    """Runs an agent CLI with the prompt on stdin (see the module docstring)."""

    name: str = "command"
    command: list[str] = field(default_factory=list)
    preset: str = "json"
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    model: str | None = None
    kill_grace_s: float = 2.0
    extra_args: list[str] = field(default_factory=list)
    max_turns: int | None = None
    permission_mode: str | None = None
    allowed_tools: list[str] = field(default_factory=list)
    disallowed_tools: list[str] = field(default_factory=list)
    sandbox: str | None = None
    skip_git_repo_check: bool = False
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_answer_bytes: int = 4 * 1024 * 1024
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES
    pass_env: list[str] = field(default_factory=list)
    simulated: bool = False
    steerable: bool = False
    """Claude Code only: send the prompt as stream-json input and keep stdin open, so a
    person's message (``tether steer``, ``m``) reaches the session mid-run."""

    def __post_init__(self) -> None:
        preset = PRESETS.get(self.preset)
        if preset is None:
            raise ValueError(f"preset must be one of {', '.join(PRESETS)}, not {self.preset!r}")
        if self.steerable and not preset.takes_steers:
            raise ValueError(f"steerable needs the claude-code preset; {self.preset} runs one "
                             "shot and cannot take a message mid-run")
        if isinstance(self.command, str):
            self.command = [self.command]
        if not self.command:
            if not preset.default_program:
                raise ValueError(f"the {self.preset} preset needs a command")
            self.command = list(preset.default_program)
        self.command = _string_list(self.command, "command")
        self.extra_args = _string_list(self.extra_args, "extra_args")
        self.allowed_tools = _string_list(self.allowed_tools, "allowed_tools")
        self.disallowed_tools = _string_list(self.disallowed_tools, "disallowed_tools")
        self.pass_env = _string_list(self.pass_env, "pass_env")
        if not isinstance(self.env, dict) or not all(
            isinstance(v, str) for v in self.env.values()
        ):
            raise ValueError("env must be a table of text values")
        check_agent_variables(self.pass_env, self.env)
        for key in ("max_answer_bytes", "max_output_bytes", "max_log_bytes"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a whole number of bytes >= 1")
        for other in PRESETS.values():
            for key in other.own_settings:
                if other is not preset and getattr(self, key) not in other.unset:
                    raise ValueError(f"{key} is a {other.name} setting, not one for {self.preset}")
        if self.max_turns is not None and (
            isinstance(self.max_turns, bool)
            or not isinstance(self.max_turns, int)
            or self.max_turns < 1
        ):
            raise ValueError("max_turns must be a whole number >= 1")
        if self.permission_mode is not None and not _WORD.match(str(self.permission_mode)):
            raise ValueError("permission_mode must be a mode name such as acceptEdits")
        if self.sandbox is not None and self.sandbox not in SANDBOX_MODES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}")
        if not isinstance(self.skip_git_repo_check, bool):
            raise ValueError("skip_git_repo_check must be true or false")

    @property
    def _preset(self) -> Preset:
        return PRESETS[self.preset]

    @property
    def native_structured_output(self) -> bool:
        """Claude Code (``--json-schema``) and Codex (``--output-schema``) take the schema."""
        return self._preset.takes_schema_and_tools

    def refusal(self, output_schema: dict[str, Any] | None) -> str | None:
        """Why this agent cannot take a task with ``output_schema`` (checked before the run),
        or None: Codex needs a schema that can be strict."""
        return self._preset.refusal(self, output_schema)

    @property
    def supports_tools(self) -> bool:
        """Claude Code and Codex take the memory tools over MCP; other programs cannot."""
        return self._preset.takes_schema_and_tools

    @property
    def takes_steers(self) -> bool:
        """Claude Code takes a person's message mid-run (stream-json input); others cannot."""
        return self.steerable and self._preset.takes_steers

    @property
    def resumes_sessions(self) -> bool:
        """Claude Code (``--resume``) and Codex (``exec resume``) continue a session by id."""
        return self._preset.resumes_sessions

    # -- the command line ------------------------------------------------------------------

    def argv_for(
        self, request: AgentRequest, folder: Path | None, resume: str | None = None
    ) -> list[str]:
        """The command line of one invocation for this request (``resume``: the session it
        continues)."""
        options = mcp_options(request.tools) if self.supports_tools else None
        server = mcp_argv(options, request.attempt) if options is not None else None
        return self._preset.argv(self, Invocation(request, folder, server, resume))

    # -- running ---------------------------------------------------------------------------

    async def run(self, request: AgentRequest) -> AgentResult:
        """Run the command once; parse its answer and usage per the preset.

        A request that continues a session (``resume_session``) sends ``resume_prompt`` into
        it; when the CLI says the session cannot be continued, a fresh session gets the whole
        prompt (both invocations are in the attempt's details)."""
        resume = request.resume_session if self.resumes_sessions else None
        if resume is None:
            return await self._invoke(request, None, request.prompt)
        text = request.resume_prompt or request.prompt
        try:
            return await self._invoke(request, resume, text)
        except AgentError as error:
            if not resume_failed(str(error)):
                raise
        request.details.setdefault("notes", []).append(
            f"session {resume} could not be resumed; a fresh session was started"
        )
        return await self._invoke(request, None, request.prompt)

    async def _invoke(
        self, request: AgentRequest, resume: str | None, stdin_text: str
    ) -> AgentResult:
        folder = request.ensure_folder()
        argv = self.argv_for(request, folder, resume)
        steering = request.steers if self.takes_steers else None
        if steering is not None:
            argv = [*argv, *INPUT_ARGS]
        invocation: dict[str, Any] = {"preset": self.preset, "command": _shown(argv)}
        if resume is not None:
            invocation["resumed_session"] = resume
        request.details.setdefault("invocations", []).append(invocation)
        tether = {
            "TETHER_RUN_ID": request.run_id,
            "TETHER_NODE_ID": request.node_id,
            "TETHER_ATTEMPT": str(request.attempt),
            "TETHER_ITERATION": str(request.iteration),
        }
        if self.model:
            tether["TETHER_MODEL"] = self.model
        if request.output_schema is not None:
            tether["TETHER_OUTPUT_SCHEMA"] = json.dumps(request.output_schema)
        env = agent_environment(
            os.environ, preset=self.preset, pass_env=self.pass_env, env=self.env, tether=tether
        )
        # Made before the start: it reads what exists before the program writes (the usage a
        # resumed Codex thread had already spent).
        reader = self._preset.reader(self, request)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                start_new_session=True,
                # Little read-ahead: what Tether has seen is what the CLI has printed, so a
                # budget stop lands within one call of what the CLI really did.
                limit=STREAM_LIMIT,
            )
        except OSError as error:
            raise AgentError(
                f"could not start {argv[0]!r}: {error.strerror or error}", retryable=False
            ) from error
        WATCHDOG.watch(process.pid)  # its group dies with this process, however that ends
        lines = _Lines(reader, request, Turns() if steering is not None else None)
        stderr = TailBuffer()
        splitter = LineSplitter(self.max_line_bytes)
        try:
            await self._communicate(process, stdin_text, request, lines, stderr, splitter)
        except BaseException:
            await self._kill_group(process)
            invocation["stopped"] = True
            with contextlib.suppress(Exception):
                # What it printed before it died was spent too: read it, record its calls.
                await asyncio.shield(self._drain(process, lines, splitter))
                for call in reader.pending_calls():
                    await asyncio.shield(request.on_call(call))
            raise
        finally:
            WATCHDOG.release(process.pid)
        assert process.returncode is not None
        outcome = reader.finish(process.returncode, stderr.last_lines(), request.clock.now_ms())
        if lines.long_lines:
            outcome.details["unparsed_long_lines"] = lines.long_lines
        invocation.update(outcome.details)
        invocation["exit_status"] = process.returncode
        for warning in outcome.warnings:
            request.warn(warning)
        for call in outcome.calls:
            await request.on_call(call)
        if outcome.error is not None:
            raise self._with_long_lines(outcome.error, lines.long_lines)
        assert outcome.result is not None
        outcome.result.model = outcome.result.model or self.model
        return outcome.result

    async def _communicate(
        self,
        process: asyncio.subprocess.Process,
        stdin_text: str,
        request: AgentRequest,
        lines: _Lines,
        stderr: TailBuffer,
        splitter: LineSplitter,
    ) -> None:
        assert process.stdin and process.stdout and process.stderr
        stream_path = request.stream_path
        stderr_path = stream_path.with_name("stderr.log") if stream_path else None

        async def feed() -> None:
            assert process.stdin
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if lines.turns is not None and request.steers is not None:
                    await converse(process.stdin, stdin_text, request.steers, lines.turns,
                                   request.details)
                else:
                    process.stdin.write(stdin_text.encode("utf-8"))
                    await process.stdin.drain()
            process.stdin.close()

        async def pump_out() -> None:
            try:
                await read_out()
            finally:
                if lines.turns is not None:
                    lines.turns.end()  # no more turns: the conversation closes stdin

        async def read_out() -> None:
            assert process.stdout
            printed = 0
            with _logging(stream_path, self.max_log_bytes) as log:
                while chunk := await process.stdout.read(READ_CHUNK):
                    log.write(chunk)
                    printed += len(chunk)
                    lines.reader.take_chunk(chunk)
                    stop = lines.reader.stop_reason() or self._over_output_limit(printed)
                    if stop is not None:
                        raise AgentError(stop, retryable=False)
                    for line in splitter.feed(chunk):
                        await lines.line(line.text, line.truncated)
                for line in splitter.finish():
                    await lines.line(line.text, line.truncated)

        async def pump_err() -> None:
            assert process.stderr
            with _logging(stderr_path, self.max_log_bytes) as log:
                while chunk := await process.stderr.read(READ_CHUNK):
                    log.write(chunk)
                    stderr.add(chunk.decode("utf-8", errors="replace"))

        pumps = [asyncio.ensure_future(step) for step in (feed(), pump_out(), pump_err())]
        try:
            await asyncio.gather(*pumps)
        except BaseException:
            # Stopped (a limit, a timeout, a cancel): the other pumps end here too, so none
            # outlives the attempt holding the program's pipes.
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            raise
        await process.wait()

    async def _drain(
        self, process: asyncio.subprocess.Process, lines: _Lines, splitter: LineSplitter
    ) -> None:
        """After the process was killed: read what is left of its stdout (a pipe's worth at
        most) into the reader, so the pipes close and no printed call goes unrecorded."""
        assert process.stdout
        path = lines.request.stream_path
        # The log keeps its one bound: what the attempt's log already holds counts.
        kept = path.stat().st_size if path is not None and path.exists() else 0
        with _logging(path, max(0, self.max_log_bytes - kept)) as log:
            while chunk := await asyncio.wait_for(process.stdout.read(READ_CHUNK), DRAIN_WAIT_S):
                log.write(chunk)
                for line in splitter.feed(chunk):
                    await lines.line(line.text, line.truncated)
        for line in splitter.finish():
            await lines.line(line.text, line.truncated)

    def _with_long_lines(self, error: AgentError, long_lines: int) -> AgentError:
        """``error``, saying that lines over ``max_line_bytes`` went unread: the answer may be
        one of them, so "without a result: no output" alone would hide a 40 MB answer."""
        if not long_lines:
            return error
        return AgentError(
            f"{error} ({plural(long_lines, 'line')} of its output passed max_line_bytes "
            f"({self.max_line_bytes:,} bytes) and went unread; the answer may be among them, "
            "and the attempt's stream.log holds the output whole)",
            retryable=error.retryable,
            retry_after_s=error.retry_after_s,
            limit=error.limit,
            resets_at_ms=error.resets_at_ms,
            session_id=error.session_id,
        )

    def _over_output_limit(self, printed: int) -> str | None:
        if printed <= self.max_output_bytes:
            return None
        return (
            f"{self.command[0]} printed more than {self.max_output_bytes:,} bytes "
            "(max_output_bytes) and was stopped; the start of its output is in the attempt's "
            "stream.log."
        )

    async def _kill_group(self, process: asyncio.subprocess.Process) -> None:
        """SIGTERM the process group, then SIGKILL it if it does not exit in time."""
        try:
            if process.returncode is None:
                await self._signal_group(process)
        finally:
            # Its pipes may be left unread (a limit stopped the reading): close them, or the
            # loop keeps their transport until the loop itself is closed.
            transport = getattr(process, "_transport", None)
            if transport is not None:
                transport.close()

    async def _signal_group(self, process: asyncio.subprocess.Process) -> None:
        for sig, wait in ((signal.SIGTERM, self.kill_grace_s), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            try:
                await asyncio.wait_for(asyncio.shield(process.wait()), wait)
                break
            except (TimeoutError, asyncio.CancelledError):
                continue
        # Grandchildren may hold the group after the leader exits: make sure they die too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


@contextlib.contextmanager
def _logging(path: Path | None, limit: int) -> Any:
    log = BoundedLog(path, limit)
    try:
        yield log
    finally:
        log.close()
