"""The ``claude-code`` preset: what Tether passes to Claude Code and how it reads the session.

Command line: ``claude -p --output-format stream-json --verbose`` plus, from the agent's
settings, ``--model``, ``--max-turns``, ``--permission-mode``, ``--allowedTools``,
``--disallowedTools`` and any ``extra_args``; ``--json-schema SCHEMA`` when the task has an
output model; ``--resume SESSION`` for a repair turn (the same session continues instead of
starting from nothing); ``--mcp-config`` and the two ``mcp__tether__*`` tools when the task
offers memory tools. The prompt goes to stdin.

Reading the session (:class:`ClaudeSession`, fed one stdout line at a time):

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
* **Reconciliation.** The ``result`` event's ``modelUsage`` holds per-model session totals
  (sub-agents and helper models included), and its ``costUSD`` values add up to
  ``total_cost_usd``. They are authoritative for the attempt's total: per model, whatever the
  totals hold beyond that model's per-message calls is recorded as one explicit
  ``reconciliation`` call of that model (a model the stream never showed gets one for its
  whole usage), so nothing is lost and nothing is counted twice. If the stream ever showed
  more than the totals, the per-message figures are kept and the excess is written in the
  attempt's details. Without ``modelUsage`` (older CLIs), the top-level ``usage`` plays that
  role for the session.
* **Cost.** What each model's ``costUSD`` holds beyond the table prices of its calls
  recorded while the session ran is shared over the calls recorded with the result (and its
  reconciliation row) in proportion to what each would cost at list price (the price table,
  or Anthropic's lane ratios for an unknown model); when none is left to take it, or the
  table priced the earlier calls above the reported cost, one reconciliation row holds the
  difference, negative in the second case. Either way the per-call costs add up exactly to
  what Claude Code reported. Cost that ``total_cost_usd`` holds beyond the per-model costs is
  one more reconciliation row.
* **Failures.** A non-zero exit still prints the result: its ``is_error``, ``subtype``,
  ``api_error_status`` and text give the real reason, and the tokens the session spent are
  recorded either way. ``error_max_turns``, quota, auth and invalid-model errors are permanent;
  rate limits and overloads are transient. A ``success`` with an empty ``result`` and no
  ``structured_output`` is a failure. The verbose JSON-array form (``--output-format json``
  with verbose settings) and the single result object are read the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.agents.base import AgentError, AgentResult, ModelCall
from engine.agents.failures import classify, status_kind
from engine.agents.outcome import Outcome, json_values
from engine.agents.usage import subtract, token_count
from engine.pricing import ANTHROPIC_RELATIVE, PriceTable, split_cost
from store.run_records import TokenUsage

PROTOCOL_ARGS = ["-p", "--output-format", "stream-json", "--verbose"]
PERMANENT_SUBTYPES = frozenset(
    {"error_max_turns", "error_max_budget_usd", "error_max_structured_output_retries"}
)
SOURCE = "Claude Code"


@dataclass(frozen=True)
class ClaudeSettings:
    """The agent settings that become Claude Code flags (see the module docstring)."""

    model: str | None = None
    max_turns: int | None = None
    permission_mode: str | None = None
    allowed_tools: Sequence[str] = ()
    disallowed_tools: Sequence[str] = ()
    extra_args: Sequence[str] = ()


def claude_argv(
    program: Sequence[str],
    settings: ClaudeSettings,
    *,
    schema: dict[str, Any] | None = None,
    resume_session: str | None = None,
    mcp_config: dict[str, Any] | None = None,
    mcp_tools: Sequence[str] = (),
) -> list[str]:
    """The full command line for one invocation (the prompt goes to stdin)."""
    argv = [*program, *PROTOCOL_ARGS]
    if settings.model:
        argv += ["--model", settings.model]
    if settings.max_turns is not None:
        argv += ["--max-turns", str(settings.max_turns)]
    if settings.permission_mode:
        argv += ["--permission-mode", settings.permission_mode]
    allowed = [*settings.allowed_tools, *mcp_tools]
    if allowed:
        argv += ["--allowedTools", ",".join(allowed)]
    if settings.disallowed_tools:
        argv += ["--disallowedTools", ",".join(settings.disallowed_tools)]
    if mcp_config is not None:
        argv += ["--mcp-config", json.dumps(mcp_config, separators=(",", ":"))]
    if schema is not None:
        argv += ["--json-schema", json.dumps(schema, separators=(",", ":"))]
    if resume_session:
        argv += ["--resume", resume_session]
    argv += list(settings.extra_args)
    return argv


def message_usage(usage: Any) -> TokenUsage:
    """One API message's usage as lanes (thinking tokens, when reported, are reasoning)."""
    output = token_count(usage, "output_tokens", SOURCE)
    details = usage.get("output_tokens_details") if isinstance(usage, dict) else None
    thinking = min(output, token_count(details, "thinking_tokens", SOURCE))
    return TokenUsage(
        input=token_count(usage, "input_tokens", SOURCE),
        cache_read=token_count(usage, "cache_read_input_tokens", SOURCE),
        cache_write=token_count(usage, "cache_creation_input_tokens", SOURCE),
        output=output - thinking,
        reasoning=thinking,
    )


def model_usage(entry: Any) -> TokenUsage:
    """One ``modelUsage`` entry (camelCase session totals of one model) as lanes."""
    source = f"{SOURCE}'s modelUsage"
    return TokenUsage(
        input=token_count(entry, "inputTokens", source),
        cache_read=token_count(entry, "cacheReadInputTokens", source),
        cache_write=token_count(entry, "cacheCreationInputTokens", source),
        output=token_count(entry, "outputTokens", source),
    )


def _cost(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e7:
        raise AgentError(f"{SOURCE} reported an invalid cost for {what}: {value!r}.")
    return float(value)


def _max_usage(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    return TokenUsage(
        max(a.input, b.input),
        max(a.cache_read, b.cache_read),
        max(a.cache_write, b.cache_write),
        max(a.output, b.output),
        max(a.reasoning, b.reasoning),
    )


@dataclass
class _Message:
    model: str | None
    usage: TokenUsage
    first_ms: int
    last_ms: int
    conversation: str | None = None
    """``parent_tool_use_id``: None for the main conversation, else the sub-agent's."""
    recorded: TokenUsage | None = None
    """The usage recorded while the session ran (None: not recorded yet)."""
    recorded_cost: float | None = None

    @property
    def subagent(self) -> bool:
        return self.conversation is not None


@dataclass
class _Group:
    """Calls that one authoritative total (one model, or the whole session) covers: those
    recorded while the session ran (their usage and table cost) and those recorded now."""

    model: str | None
    total: TokenUsage | None
    cost: float | None
    calls: list[ModelCall] = field(default_factory=list)
    recorded: list[tuple[TokenUsage, float]] = field(default_factory=list)


class ClaudeSession:
    """Reads one invocation's stdout line by line (see the module docstring)."""

    def __init__(self, prices: PriceTable | None = None) -> None:
        self.prices = prices or PriceTable()
        self.session_id: str | None = None
        self.init_model: str | None = None
        self.mcp_servers: list[Any] = []
        self.messages: dict[str, _Message] = {}
        self.result: dict[str, Any] | None = None
        self.tool_uses: list[str] = []

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
            # Tool results: the conversation's message that asked for them is complete.
            return self._complete(_conversation(event), keep=None)
        elif kind == "result":
            self.result = event
        return []

    def _complete(self, conversation: str | None, keep: str | None) -> list[ModelCall]:
        """Record the messages of ``conversation`` that are complete (all but ``keep``, the one
        being written), when their model has a price: without one, the reported cost is the
        only one there is, and its share is known at the end."""
        done = []
        for message_id, m in self.messages.items():
            if m.recorded is not None or m.conversation != conversation or message_id == keep:
                continue
            cost = self.prices.cost(m.model, m.usage)
            if cost is None:
                continue
            m.recorded, m.recorded_cost = m.usage, cost
            detail: dict[str, Any] = {"message_id": message_id, "cost_source": "price table"}
            if m.subagent:
                detail["subagent"] = True
            done.append(
                ModelCall(m.usage, m.model, m.first_ms, m.last_ms, cost_usd=cost, detail=detail)
            )
        return done

    def _assistant(self, event: dict[str, Any], now_ms: int) -> list[ModelCall]:
        message = event.get("message")
        if not isinstance(message, dict):
            return []
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                self.tool_uses.append(str(block.get("name")))
        message_id = message.get("id")
        if not isinstance(message_id, str) or "usage" not in message:
            return []
        model = message.get("model") if isinstance(message.get("model"), str) else None
        usage = message_usage(message.get("usage"))
        if model == "<synthetic>" and usage.total == 0:
            return []  # the CLI's own notices (an API error shown as a message): no model call
        conversation = _conversation(event)
        known = self.messages.get(message_id)
        if known is None:
            self.messages[message_id] = _Message(model, usage, now_ms, now_ms, conversation)
        else:
            known.usage = _max_usage(known.usage, usage)
            known.last_ms = now_ms
        # A new message in a conversation means its earlier one is complete.
        return self._complete(conversation, keep=message_id)

    # -- the calls -------------------------------------------------------------------------

    def message_calls(self) -> list[ModelCall]:
        """One call per API message seen and not recorded yet (no cost: priced by the
        engine, or by the reported cost at the end)."""
        calls = []
        for message_id, m in self.messages.items():
            if m.recorded is not None:
                continue
            detail: dict[str, Any] = {"message_id": message_id}
            if m.subagent:
                detail["subagent"] = True
            calls.append(ModelCall(m.usage, m.model, m.first_ms, m.last_ms, detail=detail))
        return calls

    def _groups(self, result: dict[str, Any], notes: list[str]) -> list[_Group]:
        calls = self.message_calls()
        per_model = result.get("modelUsage")
        if isinstance(per_model, dict) and per_model:
            groups = {
                str(name): _Group(
                    str(name), model_usage(entry), _cost(entry.get("costUSD"), str(name))
                )
                for name, entry in per_model.items()
                if isinstance(entry, dict)
            }
            for call in calls:
                self._group_of(groups, call.model, notes).calls.append(call)
            for m in self.messages.values():
                if m.recorded is not None:
                    group = self._group_of(groups, m.model, notes)
                    group.recorded.append((m.recorded, m.recorded_cost or 0.0))
            return list(groups.values())
        models = {m.model for m in self.messages.values() if m.model}
        main = next(iter(models)) if len(models) == 1 else self.init_model
        total = message_usage(result["usage"]) if isinstance(result.get("usage"), dict) else None
        cost = _cost(result.get("total_cost_usd"), "the session")
        recorded = [(m.recorded, m.recorded_cost or 0.0)
                    for m in self.messages.values() if m.recorded is not None]
        return [_Group(main, total, cost, calls, recorded)]

    @staticmethod
    def _group_of(groups: dict[str, _Group], model: str | None, notes: list[str]) -> _Group:
        group = groups.get(model or "")
        if group is None:
            key = f"?{model}"
            if key not in groups:
                notes.append(f"model {model} is not in modelUsage; priced by table")
            group = groups.setdefault(key, _Group(model, None, None))
        return group

    def _reconciled(self, group: _Group, now_ms: int, notes: list[str]) -> list[ModelCall]:
        calls = list(group.calls)
        recorded_usage = sum((usage for usage, _ in group.recorded), TokenUsage())
        recorded_cost = sum(cost for _, cost in group.recorded)
        if group.total is not None:
            seen = sum((c.usage for c in calls), recorded_usage)
            beyond, excess = subtract(group.total, seen)
            if beyond.total:
                calls.append(
                    ModelCall(
                        beyond,
                        group.model,
                        now_ms,
                        now_ms,
                        kind="reconciliation",
                        detail={
                            "reason": "session totals beyond the per-message calls shown "
                            "in the stream (sub-agents, helper models, final output counts)",
                            "messages_seen": len(group.calls),
                        },
                    )
                )
            if excess.total:
                notes.append(
                    f"the stream showed {excess.total:,} more {group.model or 'session'} "
                    "tokens than the session totals; the per-message figures are kept"
                )
        if group.cost is None:
            return calls
        # What the reported cost holds beyond the table prices of the calls recorded while
        # the session ran is shared by the calls recorded now (the last message, a
        # reconciliation row), in proportion to their list prices.
        rest = group.cost - recorded_cost
        if not calls and abs(rest) <= 1e-9:
            return calls
        price = self.prices.price_of(group.model) or ANTHROPIC_RELATIVE
        if calls and rest >= 0:
            shares = split_cost(rest, [price.cost(c.usage) for c in calls])
            return [_with_cost(c, share) for c, share in zip(calls, shares, strict=True)]
        # Nothing left to share it (or the table priced the recorded calls above what was
        # reported): the calls recorded now keep their table price and one row holds the
        # difference, negative when the table was the higher.
        priced = [c if c.cost_usd is not None else
                  _with_cost(c, self.prices.cost(c.model, c.usage), "price table") for c in calls]
        left = rest - sum(c.cost_usd or 0.0 for c in priced)
        reason = ("cost reported without tokens" if not group.recorded and not calls
                  else "reported cost beyond the table prices of the calls")
        priced.append(
            ModelCall(
                TokenUsage(),
                group.model,
                now_ms,
                now_ms,
                cost_usd=left,
                kind="reconciliation",
                detail={"reason": reason, "cost_source": "Claude Code costUSD"},
            )
        )
        return priced

    def _all_calls(self, result: dict[str, Any], now_ms: int, notes: list[str]) -> list[ModelCall]:
        calls: list[ModelCall] = []
        for group in self._groups(result, notes):
            calls.extend(self._reconciled(group, now_ms, notes))
        # Messages first, in stream order; then the reconciliation rows.
        order = {message_id: index for index, message_id in enumerate(self.messages)}
        calls.sort(
            key=lambda c: (c.kind != "model", order.get(str((c.detail or {}).get("message_id")), 0))
        )
        total_cost = _cost(result.get("total_cost_usd"), "the session")
        recorded = sum(m.recorded_cost or 0.0 for m in self.messages.values())
        priced = recorded + sum(c.cost_usd or 0.0 for c in calls)
        if total_cost is not None and total_cost - priced > 1e-9:
            calls.append(
                ModelCall(
                    TokenUsage(),
                    None,
                    now_ms,
                    now_ms,
                    cost_usd=total_cost - priced,
                    kind="reconciliation",
                    detail={"reason": "total_cost_usd beyond the per-model costs"},
                )
            )
        return calls

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
                notes.append(f"the tether MCP server did not connect ({status}): no memory tools")
        if notes:
            info["notes"] = notes
        return info

    def finish(self, returncode: int, stderr_tail: str, now_ms: int) -> Outcome:
        """The outcome once the process has exited."""
        notes: list[str] = []
        result = self.result
        if result is None:
            reason = stderr_tail or "no output"
            return Outcome(
                error=AgentError(
                    f"Claude Code exited with status {returncode} without a result: {reason}",
                    retryable=classify(reason) == "transient",
                ),
                calls=self.message_calls(),
                details=self.details(notes),
            )
        calls = self._all_calls(result, now_ms, notes)
        details = self.details(notes)
        error = self._error(result, returncode, stderr_tail)
        if error is not None:
            return Outcome(error=error, calls=calls, details=details)
        structured = result.get("structured_output")
        text = result.get("result")
        model = self.init_model or next((c.model for c in calls if c.model), None)
        if structured is not None:
            answer = json.dumps(structured, ensure_ascii=False)
            agent_result = AgentResult(answer, structured, model, self.session_id)
        else:
            agent_result = AgentResult(str(text), None, model, self.session_id)
        return Outcome(result=agent_result, calls=calls, details=details)

    def _error(
        self, result: dict[str, Any], returncode: int, stderr_tail: str
    ) -> AgentError | None:
        subtype = str(result.get("subtype") or "")
        text = result.get("result")
        status = result.get("api_error_status")
        status = status if isinstance(status, int) and not isinstance(status, bool) else None
        errors = result.get("errors")
        said = [str(text)] if isinstance(text, str) and text.strip() else []
        if isinstance(errors, list):
            said += [str(e) for e in errors]
        if result.get("is_error") or subtype not in ("", "success") or returncode != 0:
            reason = " | ".join(said)[:600] or stderr_tail or "no reason given"
            label = subtype if subtype and subtype != "success" else "error"
            if status is not None:
                label += f", HTTP {status}"
            if subtype in PERMANENT_SUBTYPES:
                kind = "permanent"
            else:
                kind = classify(reason, status, default=status_kind(status) or "transient")
            return AgentError(
                f"Claude Code failed ({label}, exit status {returncode}): {reason}",
                retryable=kind == "transient",
            )
        if result.get("structured_output") is None and not (isinstance(text, str) and text.strip()):
            return AgentError(
                "Claude Code finished with an empty result (no text, no structured output)."
            )
        return None


def _conversation(event: dict[str, Any]) -> str | None:
    """The conversation an event belongs to: None for the main one, else the sub-agent's
    ``parent_tool_use_id``."""
    parent = event.get("parent_tool_use_id")
    return parent if isinstance(parent, str) else None


def _with_cost(
    call: ModelCall, cost: float | None, source: str = "Claude Code costUSD"
) -> ModelCall:
    return ModelCall(
        call.usage,
        call.model,
        call.started_at_ms,
        call.finished_at_ms,
        cost_usd=cost,
        kind=call.kind,
        detail={**(call.detail or {}), "cost_source": source},
    )
