"""The generic presets, for any program:

* ``json`` — the last JSON line ``{"output" | "result" | "text": ..., "usage": {...},
  "model": ...}`` with usage keys ``input_tokens``, ``cache_read_tokens``,
  ``cache_write_tokens``, ``output_tokens``, ``reasoning_tokens``.
* ``text`` — stdout is the answer (at most ``max_answer_bytes``); no usage is reported.

Both need a ``command`` and start it with the agent's ``extra_args``.
"""

from __future__ import annotations

import json
from typing import Any

from engine.agents.agent import AgentError, AgentRequest, AgentResult, ModelCall
from engine.agents.cli.outcome import Outcome, json_values
from engine.agents.cli.preset import CommandSettings, OutputReader, Preset, exit_error
from engine.agents.reported_usage import token_count
from store.model.token_lanes import TokenUsage


def parse_json_preset(obj: dict[str, Any], model: str | None) -> Outcome:
    """The ``json`` preset's last JSON object (see the module docstring)."""
    answer = next((obj[k] for k in ("output", "result", "text") if k in obj), None)
    if answer is None:
        return Outcome(error=AgentError("The command's JSON has no output, result or text field."))
    usage = obj.get("usage")
    reported_model = obj.get("model") if isinstance(obj.get("model"), str) else model
    calls = []
    if isinstance(usage, dict):
        source = "The command"
        calls.append(
            ModelCall(
                TokenUsage(
                    input=token_count(usage, "input_tokens", source),
                    cache_read=token_count(usage, "cache_read_tokens", source),
                    cache_write=token_count(usage, "cache_write_tokens", source),
                    output=token_count(usage, "output_tokens", source),
                    reasoning=token_count(usage, "reasoning_tokens", source),
                ),
                reported_model,
            )
        )
    if isinstance(answer, dict | list):
        text = json.dumps(answer, ensure_ascii=False)
        return Outcome(result=AgentResult(text, answer, reported_model), calls=calls)
    return Outcome(result=AgentResult(str(answer), None, reported_model), calls=calls)


class JsonReader(OutputReader):
    """Keeps the last JSON object printed on stdout."""

    def __init__(self, program: str, model: str | None) -> None:
        self.program = program
        self.model = model
        self.last_json: dict[str, Any] | None = None

    def feed(self, line: str, now_ms: int) -> list[ModelCall]:
        objects = json_values(line)
        if objects:
            self.last_json = objects[-1]
        return []

    def finish(self, returncode: int, stderr_tail: str, now_ms: int) -> Outcome:
        if returncode != 0:
            return exit_error(self.program, returncode, stderr_tail)
        if self.last_json is None:
            return Outcome(error=AgentError("The command printed no JSON object on stdout."))
        return parse_json_preset(self.last_json, self.model)


class TextReader(OutputReader):
    """Keeps stdout itself, up to ``max_answer_bytes``."""

    def __init__(self, program: str, max_answer_bytes: int) -> None:
        self.program = program
        self.max_answer_bytes = max_answer_bytes
        self.parts: list[str] = []
        self.size = 0
        self.overflow = False

    def take_chunk(self, chunk: bytes) -> None:
        if self.overflow:
            return
        self.size += len(chunk)
        if self.size > self.max_answer_bytes:
            self.overflow = True
            self.parts = []
            return
        self.parts.append(chunk.decode("utf-8", errors="replace"))

    def stop_reason(self) -> str | None:
        if not self.overflow:
            return None
        return (
            f"{self.program} printed more than {self.max_answer_bytes:,} bytes, more than an "
            "answer may hold (max_answer_bytes), and was stopped; the start of its output is in "
            "the attempt's stream.log."
        )

    def finish(self, returncode: int, stderr_tail: str, now_ms: int) -> Outcome:
        if returncode != 0:
            return exit_error(self.program, returncode, stderr_tail)
        return Outcome(result=AgentResult("".join(self.parts).strip(), None, None))


class JsonPreset(Preset):
    """The ``json`` preset (see the module docstring)."""

    name = "json"

    def reader(self, agent: CommandSettings, request: AgentRequest) -> OutputReader:
        return JsonReader(agent.command[0], agent.model)


class TextPreset(Preset):
    """The ``text`` preset (see the module docstring)."""

    name = "text"

    def reader(self, agent: CommandSettings, request: AgentRequest) -> OutputReader:
        return TextReader(agent.command[0], agent.max_answer_bytes)
