"""What parsing one agent CLI invocation produced (shared by the Claude Code, Codex and generic
command presets)."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field
from typing import Any

from engine.agents.agent import AgentError, AgentResult, ModelCall


@dataclass
class Outcome:
    """The answer (or the error) of one invocation, the calls still to record, what the
    invocation reported about itself (stored in the attempt's details) and the warnings it
    deserves on the node (a memory tool call that did not run, the CLI's own warnings)."""

    result: AgentResult | None = None
    error: AgentError | None = None
    calls: list[ModelCall] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def json_values(line: str) -> list[Any]:
    """The JSON value(s) on one output line: an object, or each element of an array (Claude
    Code prints its whole session as one array in verbose ``json`` mode). Anything else,
    including noise such as log lines, gives nothing."""
    text = line.strip()
    if not text or text[0] not in "{[":
        return []
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        return []
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    return [value] if isinstance(value, dict) else []


def exit_words(returncode: int) -> str:
    """How a program ended, for a failure's sentence: ``exit status 1``, or for a process a
    signal ended (asyncio's negative status) ``killed by SIGKILL``, which "-9" does not say."""
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name}"
