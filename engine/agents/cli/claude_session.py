"""Reading a Claude Code session: :class:`ClaudeSession`, fed one stdout line at a time (the
``claude-code`` preset of :mod:`engine.agents.cli.claude_code`).

* **Calls.** Every ``assistant`` event carries its API message's ``usage``; one message id
  appears in several events (one per content block, streaming snapshots whose output count
  may still grow), so each id is one call, with the largest count seen per lane, its own
  model (``message.model``) and its own context-window bucket.
* **Recorded while the session runs.** A message is complete once its conversation moves on:
  its tool results arrive (a ``user`` event), or the same conversation starts another message
  (the main one and each sub-agent's, by ``parent_tool_use_id``, are followed apart). A
  complete message is recorded at once, so the dashboard shows its tokens while Claude Code
  works, priced by the engine's price table (its share of the reported cost is not known
  yet); the last messages are recorded with the result. A model without a price waits for
  the result, whose reported cost is then its only price.
* **Failures.** A non-zero exit still prints the result: its ``is_error``, ``subtype``,
  ``api_error_status`` and text give the real reason, and the tokens the session spent are
  recorded either way. ``error_max_turns``, quota, auth and invalid-model errors are permanent;
  rate limits and overloads are transient. A ``success`` with an empty ``result`` and no
  ``structured_output`` is a failure. The verbose JSON-array form (``--output-format json``
  with verbose settings) and the single result object are read the same way.

The session's totals and costs are reconciled with its calls by
:mod:`engine.agents.cli.claude_costs`.
"""

from __future__ import annotations

import json
from typing import Any

from engine.agents.agent import AgentResult, ModelCall
from engine.agents.cli.claude_costs import (
    SOURCE,
    Message,
    max_usage,
    message_usage,
    model_usage,
    reconcile,
    unrecorded_calls,
)
from engine.agents.cli.claude_failures import (
    no_result_error,
    rejected_reset_ms,
    session_error,
    succeeded,
)
from engine.agents.cli.mcp_wiring import CLAUDE_TOOL_NAMES
from engine.agents.cli.outcome import Outcome, json_values
from engine.agents.cli.preset import OutputReader
from engine.agents.reported_usage import one_hour_writes
from engine.pricing import PriceTable


class ClaudeSession(OutputReader):
    """Reads one invocation's stdout line by line (see the module docstring)."""

    def __init__(self, prices: PriceTable | None = None) -> None:
        self.prices = prices or PriceTable()
        self.session_id: str | None = None
        self.init_model: str | None = None
        self.mcp_servers: list[Any] = []
        self.messages: dict[str, Message] = {}
        self.result: dict[str, Any] | None = None
        self.tool_uses: list[str] = []
        self.limit: tuple[int | None, str] | None = None
        """What a rejected ``rate_limit_event`` said: reset time (epoch ms) and which limit."""
        self.late_results: list[str] = []
        """Error results that came after a successful one (kept out; see claude_failures)."""
        self.memory_tool_ids: dict[str, str] = {}
        """``tool_use`` id -> memory tool name, to match each call with its result."""
        self.warnings: list[str] = []

    # -- reading -------------------------------------------------------------------------

    def feed(self, line: str, now_ms: int) -> list[ModelCall]:
        """Take one stdout line (non-JSON noise is ignored); return the calls it completed,
        to be recorded now (see the module docstring)."""
        done: list[ModelCall] = []
        for event in json_values(line):
            done.extend(self._event(event, now_ms))
        return done

    def _event(self, event: dict[str, Any], now_ms: int) -> list[ModelCall]:
        kind = event.get("type")
        if isinstance(event.get("session_id"), str):
            self.session_id = event["session_id"]
        if kind == "system" and event.get("subtype") == "init":
            model = event.get("model")
            self.init_model = model if isinstance(model, str) else None
            servers = event.get("mcp_servers")
            self.mcp_servers = servers if isinstance(servers, list) else []
        elif kind == "assistant":
            return self._assistant(event, now_ms)
        elif kind == "user":
            self._tool_results(event)
            # Tool results: the conversation's message that asked for them is complete.
            return self._complete(_conversation(event), keep=None)
        elif kind == "result":
            if succeeded(self.result) and not succeeded(event):
                said = event.get("errors") or event.get("result") or event.get("subtype")
                self.late_results.append(str(said)[:300])
            else:
                self.result = event
        elif kind == "rate_limit_event":
            self.limit = rejected_reset_ms(event) or self.limit
        return []

    def _complete(self, conversation: str | None, keep: str | None) -> list[ModelCall]:
        """Record the messages of ``conversation`` that are complete (all but ``keep``, the one
        being written), when their model has a price: without one, the reported cost is the
        only one there is, and its share is known at the end."""
        done = []
        for message_id, m in self.messages.items():
            if m.recorded is not None or m.conversation != conversation or message_id == keep:
                continue
            cost = self.prices.cost(m.model, m.usage, cache_write_1h=m.cache_write_1h)
            if cost is None:
                continue
            m.recorded, m.recorded_cost = m.usage, cost
            detail: dict[str, Any] = {"message_id": message_id, "cost_source": "price table"}
            if m.subagent:
                detail["subagent"] = True
            done.append(
                ModelCall(m.usage, m.model, m.first_ms, m.last_ms, cost_usd=cost, detail=detail,
                          cache_write_1h=m.cache_write_1h)
            )
        return done

    def _assistant(self, event: dict[str, Any], now_ms: int) -> list[ModelCall]:
        message = event.get("message")
        if not isinstance(message, dict):
            return []
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                name = str(block.get("name"))
                self.tool_uses.append(name)
                if name in CLAUDE_TOOL_NAMES and isinstance(block.get("id"), str):
                    self.memory_tool_ids[block["id"]] = name.rsplit("__", 1)[-1]
        message_id = message.get("id")
        if not isinstance(message_id, str) or "usage" not in message:
            return []
        model = message.get("model") if isinstance(message.get("model"), str) else None
        usage = message_usage(message.get("usage"))
        if model == "<synthetic>" and usage.total == 0:
            return []  # the CLI's own notices (an API error shown as a message): no model call
        conversation = _conversation(event)
        one_hour = one_hour_writes(message.get("usage"), SOURCE)
        known = self.messages.get(message_id)
        if known is None:
            known = self.messages[message_id] = Message(model, usage, now_ms, now_ms, conversation)
        else:
            known.usage = max_usage(known.usage, usage)
            known.last_ms = now_ms
        known.cache_write_1h = max(known.cache_write_1h, one_hour)
        # A new message in a conversation means its earlier one is complete.
        return self._complete(conversation, keep=message_id)

    def _tool_results(self, event: dict[str, Any]) -> None:
        """A memory tool call that came back as an error is a warning on the node."""
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            tool = self.memory_tool_ids.get(str(block.get("tool_use_id")))
            if tool is not None and block.get("is_error"):
                said = _result_text(block.get("content"))
                self.warnings.append(
                    f"Claude Code's call to the memory tool {tool} failed: {said[:200]}"
                )

    def pending_calls(self) -> list[ModelCall]:
        """One call per API message seen and not recorded yet (no cost: priced by the
        engine, or by the reported cost at the end)."""
        return unrecorded_calls(self.messages)

    # -- the end -------------------------------------------------------------------------

    def details(self, notes: list[str]) -> dict[str, Any]:
        """What this invocation reported about itself (stored with the attempt)."""
        result = self.result or {}
        info: dict[str, Any] = {"session_id": self.session_id}
        for key in ("subtype", "num_turns", "stop_reason", "duration_ms", "total_cost_usd"):
            if result.get(key) is not None:
                info[key] = result[key]
        per_model = result.get("modelUsage")
        if isinstance(per_model, dict):
            info["models"] = {
                str(name): {"cost_usd": entry.get("costUSD"), **model_usage(entry).as_dict()}
                for name, entry in per_model.items()
                if isinstance(entry, dict)
            }
        info["messages"] = len(self.messages)
        if self.tool_uses:
            info["tool_uses"] = len(self.tool_uses)
        tether = [s for s in self.mcp_servers if isinstance(s, dict) and s.get("name") == "tether"]
        if tether:
            status = tether[0].get("status")
            info["mcp_tether_status"] = status
            if status not in (None, "connected"):
                warning = f"the tether MCP server did not connect ({status}): no memory tools"
                if warning not in self.warnings:
                    self.warnings.append(warning)
        denied = result.get("permission_denials")
        for denial in denied if isinstance(denied, list) else []:
            name = denial.get("tool_name") if isinstance(denial, dict) else None
            if name in CLAUDE_TOOL_NAMES:
                warning = f"Claude Code was not allowed to run the memory tool {name}"
                if warning not in self.warnings:
                    self.warnings.append(warning)
        if self.late_results:
            notes.append(
                "a result after the successful one was ignored (a Claude Code bug, "
                f"anthropics/claude-code#16768): {self.late_results[0]}"
            )
        if self.limit is not None:
            info["rate_limit_rejected"] = {"type": self.limit[1], "resets_at_ms": self.limit[0]}
        if notes:
            info["notes"] = notes
        return info

    def finish(self, returncode: int, stderr_tail: str, now_ms: int) -> Outcome:
        """The outcome once the process has exited."""
        notes: list[str] = []
        result = self.result
        if result is None:
            return Outcome(
                error=no_result_error(
                    returncode, stderr_tail, now_ms=now_ms, session_id=self.session_id
                ),
                calls=self.pending_calls(),
                details=self.details(notes),
                warnings=self.warnings,
            )
        calls = reconcile(self.messages, self.init_model, self.prices, result, now_ms, notes)
        details = self.details(notes)
        error = session_error(
            result,
            returncode,
            stderr_tail,
            now_ms=now_ms,
            limit=self.limit,
            session_id=self.session_id,
            exit_forgiven=bool(self.late_results) and succeeded(result),
        )
        if error is not None:
            return Outcome(error=error, calls=calls, details=details, warnings=self.warnings)
        structured = result.get("structured_output")
        text = result.get("result")
        model = self.init_model or next((c.model for c in calls if c.model), None)
        if structured is not None:
            answer = json.dumps(structured, ensure_ascii=False)
            agent_result = AgentResult(answer, structured, model, self.session_id)
        else:
            agent_result = AgentResult(str(text), None, model, self.session_id)
        return Outcome(result=agent_result, calls=calls, details=details, warnings=self.warnings)


def _result_text(content: Any) -> str:
    """A tool result's text (a string, or text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _conversation(event: dict[str, Any]) -> str | None:
    """The conversation an event belongs to: None for the main one, else the sub-agent's
    ``parent_tool_use_id``."""
    parent = event.get("parent_tool_use_id")
    return parent if isinstance(parent, str) else None
