"""What Codex did besides answering, from its ``item.completed`` events (pure functions).

Every tool call item is kept on the attempt (``tool_calls`` in its details: type, name,
status, error or exit code), so ``tether node`` shows what the session ran:
``mcp_tool_call`` (``server``, ``tool``, ``status`` completed | failed, ``error.message``),
``command_execution`` (``command``, ``exit_code``, ``status`` completed | failed | declined),
``file_change`` (``changes[].path``, ``status``), ``web_search`` (``query``). A memory tool call
(server ``tether``) that did not complete is a warning on the node: ``codex exec`` has nobody
to approve a gated call and cancels it ("user cancelled MCP tool call", openai/codex#16685),
so a task meant to remember would otherwise finish as if it had. So is Codex's own ``error``
item (a non-fatal warning, such as unknown model metadata).
"""

from __future__ import annotations

from typing import Any

from engine.agents.cli.mcp_wiring import SERVER_NAME

TOOL_ITEMS = ("mcp_tool_call", "command_execution", "file_change", "web_search")
MAX_NAME = 200


def _text(value: Any, limit: int = MAX_NAME) -> str:
    text = str(value if value is not None else "")
    return text if len(text) <= limit else text[:limit] + "…"


def tool_record(item: dict[str, Any]) -> dict[str, Any] | None:
    """A completed tool item as stored with the attempt, or None for other items."""
    kind = item.get("type")
    if kind not in TOOL_ITEMS:
        return None
    record: dict[str, Any] = {"type": kind, "status": _text(item.get("status"), 40)}
    if kind == "mcp_tool_call":
        record["name"] = f"{_text(item.get('server'), 60)}.{_text(item.get('tool'), 80)}"
        error = item.get("error")
        if isinstance(error, dict) and error.get("message"):
            record["error"] = _text(error["message"], 300)
    elif kind == "command_execution":
        record["name"] = _text(item.get("command"))
        if isinstance(item.get("exit_code"), int):
            record["exit_code"] = item["exit_code"]
    elif kind == "file_change":
        changes = item.get("changes")
        paths = [
            f"{c.get('kind', '?')} {c.get('path', '?')}"
            for c in (changes if isinstance(changes, list) else [])
            if isinstance(c, dict)
        ]
        record["name"] = _text(", ".join(paths))
    else:
        record["name"] = _text(item.get("query"))
    return record


def tool_warning(record: dict[str, Any]) -> str | None:
    """The warning a tool call deserves on the node (a memory tool call that did not
    complete), or None."""
    if record.get("type") != "mcp_tool_call" or record.get("status") == "completed":
        return None
    server, _, tool = str(record.get("name", "")).partition(".")
    if server != SERVER_NAME:
        return None
    why = record.get("error") or f"status {record.get('status') or 'unknown'}"
    return f"Codex's call to the memory tool {tool} did not run: {why}"


def error_warning(item: dict[str, Any]) -> str | None:
    """Codex's own non-fatal ``error`` item as a warning, or None for other items."""
    if item.get("type") != "error":
        return None
    return "Codex: " + _text(item.get("message"), 300)
