"""Prompt assembly as pure functions, in the fixed order of BRIEF section 2:

1. memory block (when recall injected one),
2. worktree/isolation notice (when the task runs in an isolated folder),
3. the task prompt,
4. structured-output JSON instructions (only for agents without native structured output).

Keeping the JSON contract last means the final characters the model reads describe the answer
shape, and nothing is appended after it.
"""

from __future__ import annotations

import json
from typing import Any

ISOLATION_MARKER = "[tether isolation]"


def isolation_notice(path: str) -> str:
    """The notice telling an agent to stay inside its isolated working folder."""
    return (
        f"{ISOLATION_MARKER} Your working directory is an isolated worktree at {path}.\n"
        "- Do all reads, writes, installs, builds and tests inside this worktree.\n"
        "- Install dependencies fresh here; never symlink them from the parent checkout.\n"
        "- Never create, modify or delete anything outside this worktree."
    )


def json_instructions(schema: dict[str, Any]) -> str:
    """Instructions asking for exactly one JSON object matching ``schema``."""
    return (
        "REQUIRED OUTPUT: reply with ONLY one raw JSON object matching this JSON Schema:\n"
        f"{json.dumps(schema, ensure_ascii=False, sort_keys=True)}\n"
        "No prose, no markdown, no code fences. The first character of your reply must be { "
        "and the last must be }."
    )


def assemble_prompt(
    task_prompt: str,
    *,
    memory_block: str | None = None,
    isolation_path: str | None = None,
    output_schema: dict[str, Any] | None = None,
    native_structured_output: bool = False,
) -> str:
    """The full prompt sent to an agent, in the fixed order (see the module docstring).

    The isolation notice is skipped when the task prompt already carries it.
    """
    parts: list[str] = []
    if memory_block:
        parts.append(memory_block.rstrip())
    if isolation_path and ISOLATION_MARKER not in task_prompt:
        parts.append(isolation_notice(isolation_path))
    parts.append(task_prompt)
    if output_schema is not None and not native_structured_output:
        parts.append(json_instructions(output_schema))
    return "\n\n".join(parts)


def repair_prompt(raw_text: str, problem: str, schema: dict[str, Any]) -> str:
    """The one follow-up sent when an answer did not validate: what was wrong and the contract."""
    shown = raw_text if len(raw_text) <= 4000 else raw_text[:4000] + "…"
    return (
        "Your previous answer could not be used: "
        f"{problem}\n\nPrevious answer:\n{shown}\n\n" + json_instructions(schema)
    )


def continue_prompt(error: str) -> str:
    """What a retry sends into the session it resumes: the session already holds the task and
    the work done so far, so only why it stopped and what to do now."""
    shown = error if len(error) <= 600 else error[:600] + "…"
    return (
        f"Your previous turn in this session stopped with an error: {shown}\n\n"
        "Continue the same task from where you stopped; do not redo work that is already "
        "done. Finish with the final answer in exactly the form the task asked for."
    )
