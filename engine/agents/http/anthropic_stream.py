"""Messages API streaming (``stream: true``): the events of one answer put back together as
the message a non-streamed request returns (pure, no I/O).

Order (anthropic-sdk-python ``lib/streaming``; docs "Streaming Messages"): ``message_start``
(the message with empty ``content`` and its input ``usage``), then per content block
``content_block_start`` (the block), ``content_block_delta``* (``text_delta``,
``input_json_delta`` with ``partial_json``, ``thinking_delta``, ``signature_delta``,
``citations_delta``) and ``content_block_stop``, then ``message_delta`` (``stop_reason``,
``stop_sequence``, ``stop_details``, and the cumulative ``usage``: its fields replace those of
``message_start``) and ``message_stop``; ``ping`` anywhere; an ``error`` event may come after
HTTP 200 ("Overloaded"). Thinking blocks keep their signature, so a tool round or a paused
turn can send the content back as the API requires.
"""

from __future__ import annotations

import json
from typing import Any

from engine.agents.http.sse import ERROR_STATUSES, ServerEvent, StreamError


class MessageStream:
    """Accumulates one streamed message (see the module docstring)."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.started = False
        self.done = False
        self.events = 0

    def feed(self, event: ServerEvent) -> str:
        """Take one event; the answer text it adds (for the log). Raises StreamError."""
        try:
            data = json.loads(event.data) if event.data else {}
        except (ValueError, RecursionError):
            return ""
        if not isinstance(data, dict):
            return ""
        self.events += 1
        kind = data.get("type") or event.event
        if kind == "error":
            raw = data.get("error")
            error: dict[str, Any] = raw if isinstance(raw, dict) else {}
            status = ERROR_STATUSES.get(str(error.get("type")))
            raise StreamError(json.dumps(data, ensure_ascii=False)[:600], status)
        if kind == "message_start" and isinstance(data.get("message"), dict):
            self.started = True
            self.message = dict(data["message"])
            if isinstance(self.message.get("usage"), dict):
                self.usage.update(self.message["usage"])
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            index = data.get("index")
            self.blocks[index if isinstance(index, int) else len(self.blocks)] = dict(
                data["content_block"]
            )
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            return self._delta(data.get("index"), data["delta"])
        elif kind == "content_block_stop":
            self._close(data.get("index"))
        elif kind == "message_delta":
            raw_delta = data.get("delta")
            delta: dict[str, Any] = raw_delta if isinstance(raw_delta, dict) else {}
            for key in ("stop_reason", "stop_sequence", "stop_details"):
                if key in delta:
                    self.message[key] = delta[key]
            if isinstance(data.get("usage"), dict):
                self.usage.update({k: v for k, v in data["usage"].items() if v is not None})
        elif kind == "message_stop":
            self.done = True
        return ""

    def _delta(self, index: Any, delta: dict[str, Any]) -> str:
        block = self.blocks.get(index) if isinstance(index, int) else None
        if block is None:
            return ""
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text") or "")
            block["text"] = str(block.get("text") or "") + text
            return text
        if kind == "input_json_delta":
            self._json.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")
        elif kind == "signature_delta":
            block["signature"] = str(block.get("signature") or "") + str(
                delta.get("signature") or ""
            )
        elif kind == "citations_delta" and isinstance(delta.get("citation"), dict):
            block.setdefault("citations", []).append(delta["citation"])
        return ""

    def _close(self, index: Any) -> None:
        parts = self._json.pop(index, None) if isinstance(index, int) else None
        if parts is None:
            return
        text = "".join(parts)
        try:
            self.blocks[index]["input"] = json.loads(text) if text.strip() else {}
        except (ValueError, RecursionError):
            self.blocks[index]["input"] = {"_unparsed": text[:2000]}

    def response(self) -> dict[str, Any]:
        """The answer as a non-streamed Messages response."""
        for index in list(self._json):
            self._close(index)  # a stream cut inside a tool's input
        answer = {**self.message, "content": [self.blocks[i] for i in sorted(self.blocks)]}
        answer["usage"] = dict(self.usage)
        return answer
