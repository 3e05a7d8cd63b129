"""The tool calls an agent CLI's stream log shows, for the run timeline (pure): Claude Code's
``tool_use`` blocks (with the message that asked for them and whether their ``tool_result``
was an error) and Codex's ``command_execution``, ``mcp_tool_call``, ``file_change`` and
``web_search`` items. The logs carry no times; :func:`store.read.timeline.place_logged_tools`
puts them between the model calls around them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from store.read.timeline import LoggedTool

DETAIL_CHARS = 120
CODEX_TOOL_ITEMS = ("command_execution", "mcp_tool_call", "file_change", "web_search")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def _claude_detail(tool_input: Any) -> str:
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "pattern", "path", "url", "query", "description"):
            if isinstance(tool_input.get(key), str):
                return _short(tool_input[key])
        return _short(tool_input) if tool_input else ""
    return ""


def _codex_tool(item: dict[str, Any], order: int) -> LoggedTool:
    kind = item.get("type")
    status = item.get("status")
    ok = status not in ("failed", "declined", "cancelled")
    error = item.get("error")
    detail = _short(error.get("message", error)) if isinstance(error, dict) else ""
    if kind == "command_execution":
        name = "shell"
        detail = detail or _short(item.get("command", ""))
        if isinstance(item.get("exit_code"), int) and item["exit_code"] != 0:
            ok, detail = False, f"exit {item['exit_code']}: {detail}"
    elif kind == "mcp_tool_call":
        name = f"{item.get('server', 'mcp')}.{item.get('tool', '?')}"
    elif kind == "file_change":
        changes = item.get("changes")
        name = "file change"
        if isinstance(changes, list):
            paths = [str(c.get("path")) for c in changes if isinstance(c, dict)]
            detail = detail or _short(", ".join(paths))
    else:
        name = str(kind)
        detail = detail or _short(item.get("query", ""))
    return LoggedTool(name, ok, detail, None, order)


def logged_tools(lines: Iterable[str]) -> list[LoggedTool]:
    """Every tool call the stream-log ``lines`` show, in log order (lines that are not JSON,
    or JSON of another shape, are passed over)."""
    found: list[LoggedTool] = []
    by_use_id: dict[str, int] = {}
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        message = event.get("message") if isinstance(event.get("message"), dict) else {}
        assert isinstance(message, dict)
        if kind == "assistant":
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    by_use_id[str(block.get("id"))] = len(found)
                    found.append(LoggedTool(str(block.get("name", "?")), True,
                                            _claude_detail(block.get("input")),
                                            message.get("id") if isinstance(message.get("id"),
                                                                            str) else None,
                                            len(found)))
        elif kind == "user":
            for block in message.get("content") or []:
                if (isinstance(block, dict) and block.get("type") == "tool_result"
                        and block.get("is_error") and str(block.get("tool_use_id")) in by_use_id):
                    index = by_use_id[str(block["tool_use_id"])]
                    found[index] = found[index]._replace(ok=False)
        elif kind == "item.completed":
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") in CODEX_TOOL_ITEMS:
                found.append(_codex_tool(item, len(found)))
    return found
