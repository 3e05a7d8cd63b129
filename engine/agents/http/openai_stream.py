"""Chat Completions streaming (``stream: true``): the chunks of one answer put back together
as the answer a non-streamed request returns (pure, no I/O).

Each ``data:`` event is a ``chat.completion.chunk`` whose ``choices[0].delta`` carries a piece
of ``content`` (or ``refusal``), pieces of ``tool_calls`` (by ``index``: the first piece has
the ``id`` and ``function.name``, the rest append to ``function.arguments``), or the legacy
``function_call``; ``finish_reason`` arrives on the last content chunk. With
``stream_options: {"include_usage": true}`` one more chunk with empty ``choices`` carries the
``usage`` of the whole request, before ``data: [DONE]`` (openai-python
``chat_completion_stream_options_param.py``; "if the stream is interrupted, you may not
receive the final usage chunk"). The answer is complete at that chunk (or at ``[DONE]``), so
the call is recorded without waiting for anything else. llama-cpp-python never sends it:
:attr:`ChatStream.usage` stays None and the call's usage is unknown. A server may report an error as
``data: {"error": {...}}``.
"""

from __future__ import annotations

import json
from typing import Any

from engine.agents.http.sse import ServerEvent, StreamError

DONE = "[DONE]"


class ChatStream:
    """Accumulates one streamed answer (see the module docstring)."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.function_call: dict[str, str] | None = None
        self.finish_reason: str | None = None
        self.incomplete: Any = None
        self.usage: dict[str, Any] | None = None
        self.events = 0
        self.done = False

    def feed(self, event: ServerEvent) -> str:
        """Take one event; the answer text it adds (for the log). Raises StreamError."""
        if event.data.strip() == DONE:
            self.done = True
            return ""
        try:
            chunk = json.loads(event.data)
        except (ValueError, RecursionError):
            return ""  # not JSON: a proxy's keep-alive or noise
        if not isinstance(chunk, dict):
            return ""
        self.events += 1
        error = chunk.get("error")
        if isinstance(error, dict):
            status = error.get("code") if isinstance(error.get("code"), int) else None
            raise StreamError(json.dumps(error, ensure_ascii=False)[:600], status)
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
            # The usage chunk comes last: the answer is complete, and recorded at once.
            self.done = self.done or self.finish_reason is not None
        if chunk.get("incomplete_details") is not None:
            self.incomplete = chunk["incomplete_details"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return ""
        choice = choices[0]
        if choice.get("finish_reason") is not None:
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta")
        return self._delta(delta) if isinstance(delta, dict) else ""

    def _delta(self, delta: dict[str, Any]) -> str:
        text = delta.get("content")
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        for piece in delta.get("tool_calls") or []:
            if isinstance(piece, dict):
                self._tool_piece(piece)
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
            call = self.function_call or {"name": "", "arguments": ""}
            call["name"] += str(legacy.get("name") or "")
            call["arguments"] += str(legacy.get("arguments") or "")
            self.function_call = call
        if isinstance(text, str):
            self.content.append(text)
            return text
        return ""

    def _tool_piece(self, piece: dict[str, Any]) -> None:
        raw = piece.get("index")
        index = raw if isinstance(raw, int) else len(self.tool_calls)
        call = self.tool_calls.setdefault(
            index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if piece.get("id"):
            call["id"] = str(piece["id"])
        function = piece.get("function")
        if isinstance(function, dict):
            call["function"]["name"] += str(function.get("name") or "")
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # a server that sends them parsed
                arguments = json.dumps(arguments)
            call["function"]["arguments"] += str(arguments or "")

    def response(self) -> dict[str, Any]:
        """The answer as a non-streamed ``/chat/completions`` response."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) if self.content else None,
        }
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        if self.function_call is not None:
            message["function_call"] = self.function_call
        answer: dict[str, Any] = {
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage,
        }
        if self.incomplete is not None:
            answer["incomplete_details"] = self.incomplete
        return answer
