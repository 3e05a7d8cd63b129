"""The pure parts of the HTTP agents: the SSE decoder (line endings, comments, multi-line
data, bounds), the stop-reason tables of both APIs, and the OpenAI-compatible request rules
(limit names per server, ignored limits and tools)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.agents.http.anthropic_stream import MessageStream
from engine.agents.http.openai_rules import (
    is_official,
    limit_fields,
    over_limit,
    rejects_second_limit,
    tool_calls_of,
    tools_were_ignored,
)
from engine.agents.http.openai_stream import ChatStream
from engine.agents.http.sse import EventTooLarge, ServerEvent, SseDecoder
from engine.agents.http.stop_reasons import anthropic_ending, openai_ending, refusal_reason

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "http"


def _decode(*chunks: bytes, limit: int = 1 << 20) -> list[ServerEvent]:
    decoder = SseDecoder(limit)
    events = [e for chunk in chunks for e in decoder.feed(chunk)]
    return events + list(decoder.finish())


def test_sse_events_in_any_line_ending_split_anywhere() -> None:
    text = b"event: ping\r\ndata: {}\r\n\r\n: keep-alive\n\ndata: a\ndata: b\r\rdata: last"
    whole = _decode(text)
    assert whole == [
        ServerEvent("ping", "{}"),
        ServerEvent("message", "a\nb"),
        ServerEvent("message", "last"),
    ]
    # The same bytes one at a time (a CRLF split across chunks included).
    assert _decode(*(text[i : i + 1] for i in range(len(text)))) == whole
    assert _decode(b"event: lonely\n\n") == []  # an event without data is dropped


def test_sse_lines_and_events_are_bounded() -> None:
    with pytest.raises(EventTooLarge):
        _decode(b"data: " + b"x" * 5000 + b"\n\n", limit=1024)
    with pytest.raises(EventTooLarge):
        _decode(*(b"data: " + b"x" * 300 + b"\n" for _ in range(10)), limit=1024)


def test_captured_streams_rebuild_the_non_streamed_answer() -> None:
    chat = ChatStream()
    for event in _decode((CAPTURES / "openai_stream_tool_call.sse").read_bytes()):
        chat.feed(event)
    answer = chat.response()
    (call,) = answer["choices"][0]["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"New York City"}'}
    assert answer["choices"][0]["finish_reason"] == "tool_calls" and chat.done
    assert answer["usage"]["prompt_tokens"] == 44
    message = MessageStream()
    for event in _decode((CAPTURES / "anthropic_sse_tool_use.sse").read_bytes()):
        message.feed(event)
    answer = message.response()
    assert [b["type"] for b in answer["content"]] == ["text", "tool_use"]
    assert answer["content"][1]["input"] == {"location": "Paris"}
    assert answer["stop_reason"] == "tool_use" and answer["usage"]["output_tokens"] == 65
    assert answer["usage"]["input_tokens"] == 377  # message_start's, kept


@pytest.mark.parametrize(
    ("reason", "ending"),
    [("end_turn", "finished"), ("stop_sequence", "finished"), ("tool_use", "tools"),
     ("pause_turn", "continue"), ("compaction", "continue"), ("max_tokens", "truncated"),
     ("model_context_window_exceeded", "context_full"), ("refusal", "refused"),
     ("something_new", "unknown"), (None, "unknown")],
)  # fmt: skip
def test_every_anthropic_stop_reason(reason: str | None, ending: str) -> None:
    assert anthropic_ending(reason) == ending


@pytest.mark.parametrize(
    ("reason", "incomplete", "ending"),
    [("stop", None, "finished"), ("length", None, "truncated"), ("tool_calls", None, "tools"),
     ("function_call", None, "tools"), ("content_filter", None, "refused"),
     (None, None, "finished"), ("eos_token", None, "finished"),
     ("stop", {"reason": "max_output_tokens"}, "truncated"),
     ("stop", {"reason": "content_filter"}, "refused"), ("weird", None, "unknown")],
)  # fmt: skip
def test_every_openai_finish_reason(reason: str | None, incomplete: object, ending: str) -> None:
    assert openai_ending(reason, incomplete) == ending


def test_refusal_details_are_said() -> None:
    assert refusal_reason({"type": "refusal", "category": "cyber", "explanation": "No."}) == (
        "cyber: No."
    )
    assert refusal_reason(None) == ""


def test_the_limit_goes_under_the_names_each_server_applies() -> None:
    assert is_official("https://api.openai.com/v1") and not is_official("http://127.0.0.1:8080/v1")
    assert limit_fields(None, 64, both=True) == {"max_completion_tokens": 64, "max_tokens": 64}
    assert limit_fields(None, 64, both=False) == {"max_completion_tokens": 64}
    assert limit_fields(32, None, both=True) == {"max_tokens": 32}
    assert limit_fields(None, None, both=True) == {}
    assert rejects_second_limit(400, "Unsupported parameter: 'max_tokens' is not supported")
    assert not rejects_second_limit(400, "use max_completion_tokens instead of max_tokens")
    assert over_limit({"completion_tokens": 2002}, 16) == 2002
    assert over_limit({"completion_tokens": 16}, 16) is None


def test_ignored_tools_and_legacy_function_calls() -> None:
    assert tools_were_ignored({"prompt_tokens": 39}, {"prompt_tokens": 39}) is True
    assert tools_were_ignored({"prompt_tokens": 412}, {"prompt_tokens": 39}) is False
    assert tools_were_ignored({}, {"prompt_tokens": 39}) is None
    # llama-cpp-python's legacy function_call name ends in a colon.
    legacy = {"function_call": {"name": "get_weather:", "arguments": '{"city": "Paris"}'}}
    (call,) = tool_calls_of(legacy)
    assert call["function"]["name"] == "get_weather"
