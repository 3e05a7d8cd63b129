"""A Claude Code session's usage and cost (pure): the token lanes of its API messages and of
its ``modelUsage`` totals, and how those authoritative totals and reported costs are
reconciled with the calls recorded per message (:mod:`engine.agents.cli.claude_session`
reads the stream).

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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.agents.agent import AgentError, ModelCall
from engine.agents.reported_usage import subtract, token_count
from engine.pricing import ANTHROPIC_RELATIVE, PriceTable, split_cost
from store.model.token_lanes import TokenUsage

SOURCE = "Claude Code"


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


def reported_cost(value: Any, what: str) -> float | None:
    """A cost Claude Code reported (None when absent); an impossible one fails the attempt."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e7:
        raise AgentError(f"{SOURCE} reported an invalid cost for {what}: {value!r}.")
    return float(value)


def max_usage(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    """The largest count seen per lane (a message's streaming snapshots only grow)."""
    return TokenUsage(*map(max, a, b))


@dataclass
class Message:
    """One API message of the session as its events showed it."""

    model: str | None
    usage: TokenUsage
    first_ms: int
    last_ms: int
    conversation: str | None = None
    """``parent_tool_use_id``: None for the main conversation, else the sub-agent's."""
    recorded: TokenUsage | None = None
    """The usage recorded while the session ran (None: not recorded yet)."""
    recorded_cost: float | None = None
    cache_write_1h: int = 0
    """How many cache-write tokens had the 1-hour TTL (``usage.cache_creation``)."""

    @property
    def subagent(self) -> bool:
        return self.conversation is not None


def unrecorded_calls(messages: dict[str, Message]) -> list[ModelCall]:
    """One call per API message seen and not recorded yet (no cost: priced by the
    engine, or by the reported cost at the end)."""
    calls = []
    for message_id, m in messages.items():
        if m.recorded is not None:
            continue
        detail: dict[str, Any] = {"message_id": message_id}
        if m.subagent:
            detail["subagent"] = True
        calls.append(
            ModelCall(m.usage, m.model, m.first_ms, m.last_ms, detail=detail,
                      cache_write_1h=m.cache_write_1h)
        )
    return calls


@dataclass
class _Group:
    """Calls that one authoritative total (one model, or the whole session) covers: those
    recorded while the session ran (their usage and table cost) and those recorded now."""

    model: str | None
    total: TokenUsage | None
    cost: float | None
    calls: list[ModelCall] = field(default_factory=list)
    recorded: list[tuple[TokenUsage, float]] = field(default_factory=list)


def _groups(
    messages: dict[str, Message], init_model: str | None, result: dict[str, Any],
    notes: list[str],
) -> list[_Group]:
    """The calls each authoritative total covers: one group per model of ``modelUsage``, or one
    for the whole session (older CLIs)."""
    calls = unrecorded_calls(messages)
    per_model = result.get("modelUsage")
    if isinstance(per_model, dict) and per_model:
        groups = {
            str(name): _Group(
                str(name), model_usage(entry), reported_cost(entry.get("costUSD"), str(name))
            )
            for name, entry in per_model.items()
            if isinstance(entry, dict)
        }
        for call in calls:
            _group_of(groups, call.model, notes).calls.append(call)
        for m in messages.values():
            if m.recorded is not None:
                group = _group_of(groups, m.model, notes)
                group.recorded.append((m.recorded, m.recorded_cost or 0.0))
        return list(groups.values())
    models = {m.model for m in messages.values() if m.model}
    main = next(iter(models)) if len(models) == 1 else init_model
    total = message_usage(result["usage"]) if isinstance(result.get("usage"), dict) else None
    cost = reported_cost(result.get("total_cost_usd"), "the session")
    recorded = [(m.recorded, m.recorded_cost or 0.0)
                for m in messages.values() if m.recorded is not None]
    return [_Group(main, total, cost, calls, recorded)]


def _group_of(groups: dict[str, _Group], model: str | None, notes: list[str]) -> _Group:
    group = groups.get(model or "")
    if group is None:
        key = f"?{model}"
        if key not in groups:
            notes.append(f"model {model} is not in modelUsage; priced by table")
        group = groups.setdefault(key, _Group(model, None, None))
    return group


def _reconciled(
    group: _Group, prices: PriceTable, now_ms: int, notes: list[str]
) -> list[ModelCall]:
    """The calls of ``group`` with what its total holds beyond them, costed (see the module
    docstring)."""
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
    if not calls and group.recorded and abs(rest) <= 1e-9:
        return calls
    # (No call at all and a reported cost, $0 included: one row keeps it, so the attempt's
    # cost is that figure, not "unknown".)
    price = prices.price_of(group.model) or ANTHROPIC_RELATIVE
    if calls and rest >= 0:
        shares = split_cost(rest, [price.cost(c.usage) for c in calls])
        return [_with_cost(c, share) for c, share in zip(calls, shares, strict=True)]
    # Nothing left to share it (or the table priced the recorded calls above what was
    # reported): the calls recorded now keep their table price and one row holds the
    # difference, negative when the table was the higher.
    priced = [c if c.cost_usd is not None else
              _with_cost(c, prices.cost(c.model, c.usage), "price table") for c in calls]
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


def reconcile(
    messages: dict[str, Message],
    init_model: str | None,
    prices: PriceTable,
    result: dict[str, Any],
    now_ms: int,
    notes: list[str],
) -> list[ModelCall]:
    """Every call still to record once the session's ``result`` arrived: the messages not
    recorded yet, then the reconciliation rows, their costs adding up to what Claude Code
    reported (see the module docstring); ``notes`` collects what the attempt's details say."""
    calls: list[ModelCall] = []
    for group in _groups(messages, init_model, result, notes):
        calls.extend(_reconciled(group, prices, now_ms, notes))
    # Messages first, in stream order; then the reconciliation rows.
    order = {message_id: index for index, message_id in enumerate(messages)}
    calls.sort(
        key=lambda c: (c.kind != "model", order.get(str((c.detail or {}).get("message_id")), 0))
    )
    total_cost = reported_cost(result.get("total_cost_usd"), "the session")
    recorded = sum(m.recorded_cost or 0.0 for m in messages.values())
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
