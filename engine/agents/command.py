"""The command agent: runs an agent CLI (Claude Code, Codex, or any program) as a subprocess.

The prompt goes to stdin; stdout is streamed line by line into the attempt's ``stream.log``
(stderr into ``stderr.log`` beside it); the final answer and token usage are parsed from the
program's JSON output according to a preset:

* ``claude-code`` — ``claude -p --output-format json``: one JSON object with ``result`` and
  ``usage`` (``input_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens``,
  ``output_tokens``); recorded as one call (the CLI reports only the session total).
* ``codex`` — ``codex exec --json -``: JSON lines; every ``turn.completed`` event is one call
  (``input_tokens`` includes ``cached_input_tokens``, so fresh input is the difference), and
  the last ``agent_message`` item is the answer.
* ``json`` — the last JSON line ``{"output" | "result" | "text": ..., "usage": {...},
  "model": ...}`` with usage keys ``input_tokens``, ``cache_read_tokens``,
  ``cache_write_tokens``, ``output_tokens``, ``reasoning_tokens``.
* ``text`` — stdout is the answer; no usage is reported.

The process runs in its own session (process group); on timeout or cancel the whole group gets
SIGTERM, then SIGKILL after ``kill_grace_s``, so no grandchild outlives the attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from dataclasses import dataclass, field
from typing import Any

from engine.agents.base import AgentError, AgentRequest, AgentResult, ModelCall
from engine.artifacts import append_private_text
from store.run_records import TokenUsage

PRESET_COMMANDS: dict[str, list[str]] = {
    "claude-code": ["claude", "-p", "--output-format", "json"],
    "codex": ["codex", "exec", "--json", "-"],
}
PRESETS = ("claude-code", "codex", "json", "text")


def _int(mapping: Any, key: str) -> int:
    if not isinstance(mapping, dict):
        return 0
    value = mapping.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _json_lines(stdout: str) -> list[Any]:
    values = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                values.append(json.loads(line))
    return values


def parse_claude_code(stdout: str) -> tuple[AgentResult, list[ModelCall]]:
    """Parse ``claude -p --output-format json`` output."""
    objects = _json_lines(stdout)
    if not objects:
        with contextlib.suppress(ValueError):
            objects = [json.loads(stdout)]
    result = next((o for o in reversed(objects) if isinstance(o, dict) and "result" in o), None)
    if result is None:
        raise AgentError("Claude Code printed no JSON result object.")
    if result.get("is_error"):
        raise AgentError(f"Claude Code reported an error: {str(result.get('result'))[:300]}")
    usage = result.get("usage", {})
    model_usage = result.get("modelUsage")
    model = next(iter(model_usage), None) if isinstance(model_usage, dict) else None
    call = ModelCall(
        TokenUsage(
            input=_int(usage, "input_tokens"),
            cache_read=_int(usage, "cache_read_input_tokens"),
            cache_write=_int(usage, "cache_creation_input_tokens"),
            output=_int(usage, "output_tokens"),
        ),
        model,
    )
    return AgentResult(text=str(result.get("result") or ""), model=model), [call]


def parse_codex(stdout: str) -> tuple[AgentResult, list[ModelCall]]:
    """Parse ``codex exec --json`` JSON-lines output."""
    text = ""
    calls: list[ModelCall] = []
    for event in _json_lines(stdout):
        kind = event.get("type")
        if kind == "item.completed":
            item = event.get("item", {})
            if item.get("type") in ("agent_message", "assistant_message") and "text" in item:
                text = str(item["text"])
        elif kind == "turn.completed":
            usage = event.get("usage", {})
            cached = _int(usage, "cached_input_tokens")
            calls.append(
                ModelCall(
                    TokenUsage(
                        input=max(0, _int(usage, "input_tokens") - cached),
                        cache_read=cached,
                        output=_int(usage, "output_tokens"),
                        reasoning=_int(usage, "reasoning_output_tokens"),
                    )
                )
            )
        elif kind in ("turn.failed", "error"):
            message = event.get("error", {}).get("message") if kind == "turn.failed" else None
            raise AgentError(f"Codex reported an error: {message or event.get('message')}")
    if not calls and not text:
        raise AgentError("Codex printed no turn.completed or agent_message events.")
    return AgentResult(text=text), calls


def parse_json(stdout: str) -> tuple[AgentResult, list[ModelCall]]:
    """Parse the generic JSON preset (see the module docstring)."""
    objects = [o for o in _json_lines(stdout) if isinstance(o, dict)]
    if not objects:
        raise AgentError("The command printed no JSON object on stdout.")
    last = objects[-1]
    answer = next((last[k] for k in ("output", "result", "text") if k in last), None)
    if answer is None:
        raise AgentError("The command's JSON has no output, result or text field.")
    usage = last.get("usage")
    calls = []
    if isinstance(usage, dict):
        calls.append(
            ModelCall(
                TokenUsage(
                    input=_int(usage, "input_tokens"),
                    cache_read=_int(usage, "cache_read_tokens"),
                    cache_write=_int(usage, "cache_write_tokens"),
                    output=_int(usage, "output_tokens"),
                    reasoning=_int(usage, "reasoning_tokens"),
                ),
                last.get("model"),
            )
        )
    if isinstance(answer, dict | list):
        return AgentResult(text=json.dumps(answer), output=answer, model=last.get("model")), calls
    return AgentResult(text=str(answer), model=last.get("model")), calls


_PARSERS = {"claude-code": parse_claude_code, "codex": parse_codex, "json": parse_json}


@dataclass
class CommandAgent:
    """Runs ``command`` (argv list, or the preset's default) with the prompt on stdin."""

    name: str = "command"
    command: list[str] = field(default_factory=list)
    preset: str = "json"
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    model: str | None = None
    kill_grace_s: float = 2.0
    native_structured_output: bool = False
    simulated: bool = False

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {', '.join(PRESETS)}, not {self.preset!r}")
        if isinstance(self.command, str):
            self.command = [self.command]
        if not self.command:
            if self.preset not in PRESET_COMMANDS:
                raise ValueError(f"the {self.preset} preset needs a command")
            self.command = list(PRESET_COMMANDS[self.preset])

    async def run(self, request: AgentRequest) -> AgentResult:
        """Run the command once; parse its answer and usage per the preset."""
        started = request.clock.now_ms()
        request.ensure_folder()
        env = {
            **os.environ,
            **self.env,
            "TETHER_RUN_ID": request.run_id,
            "TETHER_NODE_ID": request.node_id,
            "TETHER_ATTEMPT": str(request.attempt),
            "TETHER_ITERATION": str(request.iteration),
        }
        if request.output_schema is not None:
            env["TETHER_OUTPUT_SCHEMA"] = json.dumps(request.output_schema)
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as error:
            raise AgentError(
                f"could not start {self.command[0]!r}: {error.strerror or error}", retryable=False
            ) from error
        stderr_path = request.stream_path.with_name("stderr.log") if request.stream_path else None
        try:
            stdout_text, stderr_text = await self._communicate(process, request, stderr_path)
        except BaseException:
            await self._kill_group(process)
            raise
        if process.returncode != 0:
            tail = stderr_text.strip().splitlines()[-3:]
            raise AgentError(
                f"{self.command[0]} exited with status {process.returncode}"
                + (f": {' | '.join(tail)[:400]}" if tail else "")
            )
        if self.preset == "text":
            return AgentResult(text=stdout_text.strip(), model=self.model)
        result, calls = _PARSERS[self.preset](stdout_text)
        finished = request.clock.now_ms()
        for call in calls:
            await request.on_call(
                ModelCall(call.usage, call.model or self.model, started, finished)
            )
        result.model = result.model or self.model
        return result

    async def _communicate(
        self, process: asyncio.subprocess.Process, request: AgentRequest, stderr_path: Any
    ) -> tuple[str, str]:
        assert process.stdin and process.stdout and process.stderr
        out: list[str] = []
        err: list[str] = []

        async def feed() -> None:
            assert process.stdin
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                process.stdin.write(request.prompt.encode("utf-8"))
                await process.stdin.drain()
            process.stdin.close()

        async def pump_out() -> None:
            assert process.stdout
            async for raw in process.stdout:
                line = raw.decode("utf-8", errors="replace")
                out.append(line)
                request.stream(line)

        async def pump_err() -> None:
            assert process.stderr
            async for raw in process.stderr:
                line = raw.decode("utf-8", errors="replace")
                err.append(line)
                if stderr_path is not None:
                    request.ensure_folder()
                    append_private_text(stderr_path, line)

        await asyncio.gather(feed(), pump_out(), pump_err())
        await process.wait()
        return "".join(out), "".join(err)

    async def _kill_group(self, process: asyncio.subprocess.Process) -> None:
        """SIGTERM the process group, then SIGKILL it if it does not exit in time."""
        if process.returncode is not None:
            return
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
