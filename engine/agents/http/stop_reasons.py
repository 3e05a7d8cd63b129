"""What each way a model can stop means for an attempt (pure functions), per the APIs' own
references.

OpenAI Chat Completions ``finish_reason`` (openai-python ``types/chat/chat_completion.py``):
``stop`` (a natural end or a stop sequence), ``length`` (the token limit), ``tool_calls``,
``content_filter``, ``function_call`` (deprecated: a legacy function call, taken as a tool
call). Some compatible servers add ``incomplete_details.reason`` (the Responses API's
``max_output_tokens`` or ``content_filter``) or say ``eos``/``eos_token``; both are read.

Anthropic ``stop_reason`` (anthropic-sdk-python ``types/stop_reason.py``; "Handling stop
reasons"): ``end_turn`` and ``stop_sequence`` (finished), ``tool_use`` (run the tools and
answer), ``pause_turn`` (a server-tool loop paused: send the assistant content back as it is to
continue the same turn), ``max_tokens`` (cut at the limit), ``model_context_window_exceeded``
(the answer filled the context window: truncated, not finished), ``refusal`` (declined; its
``stop_details`` say why); the beta ``compaction`` (the context was compacted mid-turn) also
continues.

Anything else is an unknown ending: the answer is kept and the attempt notes the value.
"""

from __future__ import annotations

from typing import Any, Literal

Ending = Literal["finished", "tools", "continue", "truncated", "context_full", "refused", "unknown"]

_OPENAI: dict[str, Ending] = {
    "stop": "finished",
    "eos": "finished",
    "eos_token": "finished",
    "stop_sequence": "finished",
    "end_turn": "finished",
    "length": "truncated",
    "max_tokens": "truncated",
    "model_length": "truncated",
    "tool_calls": "tools",
    "function_call": "tools",
    "content_filter": "refused",
}
_INCOMPLETE: dict[str, Ending] = {"max_output_tokens": "truncated", "content_filter": "refused"}
_ANTHROPIC: dict[str, Ending] = {
    "end_turn": "finished",
    "stop_sequence": "finished",
    "tool_use": "tools",
    "pause_turn": "continue",
    "compaction": "continue",
    "max_tokens": "truncated",
    "model_context_window_exceeded": "context_full",
    "refusal": "refused",
}


def openai_ending(finish_reason: Any, incomplete: Any = None) -> Ending:
    """What a Chat Completions choice's ``finish_reason`` (and any ``incomplete_details``)
    means; a missing one (some servers send none) is a finished answer."""
    if isinstance(incomplete, dict) and incomplete.get("reason") in _INCOMPLETE:
        return _INCOMPLETE[str(incomplete["reason"])]
    if finish_reason is None:
        return "finished"
    return _OPENAI.get(str(finish_reason), "unknown")


def anthropic_ending(stop_reason: Any) -> Ending:
    """What a Messages response's ``stop_reason`` means (None: an unknown ending)."""
    return _ANTHROPIC.get(str(stop_reason), "unknown") if stop_reason is not None else "unknown"


def refusal_reason(stop_details: Any) -> str:
    """Anthropic's ``stop_details`` of a refusal as words (category and explanation)."""
    if not isinstance(stop_details, dict):
        return ""
    parts = [str(stop_details[k]) for k in ("category", "explanation") if stop_details.get(k)]
    return ": ".join(parts)
