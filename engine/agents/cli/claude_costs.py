"""A Claude Code session's usage and cost (pure): the token lanes of its API messages and of
its ``modelUsage`` totals, and how those authoritative totals and reported costs are
reconciled with the calls recorded per message (:mod:`engine.agents.cli.claude_session`
reads the stream).

One truth per model of the session, never a negative row; the other figures are a note in
the attempt's details (``tether node`` shows them):

* **Tokens.** The ``result`` event's ``modelUsage`` holds per-model session totals (sub-agents
  and helper models included). A message's ``output_tokens`` already includes its thinking
  (``output_tokens_details.thinking_tokens``, shown in the reasoning lane), and ``modelUsage``
  has no thinking split, so the two are compared with thinking folded into output. When the
  totals hold more than that model's per-message calls, they are the truth: the difference is
  one explicit ``reconciliation`` call of that model (a model the stream never showed gets
  one for its whole usage), so nothing is lost and nothing is counted twice. When the stream
  shows more than the totals in any lane, the stream is the truth for that model: its calls
  are kept as they are, and the totals are a note. Without ``modelUsage`` (older CLIs), the
  top-level ``usage`` plays that role for the session.
* **Cost.** When the totals are the truth, the dollars are Claude Code's: what the model's
  ``costUSD`` holds beyond the table prices of its calls recorded while the session ran is
  shared over the calls recorded with the result (and its reconciliation row) in proportion
  to their list price (the price table, or Anthropic's lane ratios for an unknown model), or
  is one cost-only reconciliation row when no call is left to take it; the per-call costs then
  add up exactly to what Claude Code reported. When the stream is the truth, or the table
  priced the calls recorded during the session above the reported cost, every call keeps its
  table price and the reported cost is a note (a model the table has no price for keeps
  Claude Code's cost: it is the only one there is). Cost that ``total_cost_usd`` holds beyond
  the per-model ``costUSD`` values is one more (positive) reconciliation row.
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


def billable(usage: TokenUsage) -> TokenUsage:
    """``usage`` with thinking folded into output, as ``modelUsage`` counts it: Anthropic's
    ``output_tokens`` already includes thinking (``output_tokens_details.thinking_tokens`` is
    a part of it), and ``modelUsage`` has no thinking split."""
    return usage._replace(output=usage.output + usage.reasoning, reasoning=0)


def _reconciled(
    group: _Group, prices: PriceTable, now_ms: int, notes: list[str]
) -> list[ModelCall]:
    """The calls of ``group`` with what its total holds beyond them, costed from one truth
    (see the module docstring)."""
    calls = list(group.calls)
    recorded_usage = sum((usage for usage, _ in group.recorded), TokenUsage())
    recorded_cost = sum(cost for _, cost in group.recorded)
    name = group.model or "session"
    stream_truth = False
    if group.total is not None:
        seen = billable(sum((c.usage for c in calls), recorded_usage))
        beyond, excess = subtract(group.total, seen)
        if excess.total:
            # The stream shows more than the totals: its per-message calls are the truth for
            # this model (tokens, and the price table for dollars); the totals are a note.
            stream_truth = True
            notes.append(
                f"the stream showed {excess.total:,} more {name} tokens than modelUsage "
                f"({group.total.total:,}); the per-message figures are kept"
            )
        elif beyond.total:
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
    if group.cost is None:
        return calls
    rest = group.cost - recorded_cost
    price = prices.price_of(group.model)
    if rest < -1e-9 or (stream_truth and price is not None):
        # The reported cost is not what these tokens cost at list price (the table priced
        # the calls recorded during the session higher, or the stream holds more tokens):
        # every call keeps its table price, and the reported cost is a note.
        priced = [c if c.cost_usd is not None
                  else _with_cost(c, prices.cost(c.model, c.usage), "price table")
                  for c in calls]  # fmt: skip
        table = recorded_cost + sum(c.cost_usd or 0.0 for c in priced)
        notes.append(
            f"Claude Code reported ${group.cost:.6f} for {name}; its calls are priced by the "
            f"price table at ${table:.6f}"
        )
        return priced
    # What the reported cost holds beyond the table prices of the calls recorded while the
    # session ran is shared by the calls recorded now, in proportion to their list prices.
    if not calls:
        # No call at all and a reported cost, $0 included: one row keeps it, so the
        # attempt's cost is that figure, not "unknown".
        if rest <= 1e-9 and group.recorded:
            return calls
        reason = "cost reported without tokens" if not group.recorded else (
            "reported cost beyond the table prices of the calls"
        )
        return [
            ModelCall(
                TokenUsage(), group.model, now_ms, now_ms, cost_usd=rest, kind="reconciliation",
                detail={"reason": reason, "cost_source": "Claude Code costUSD"},
            )
        ]  # fmt: skip
    shares = split_cost(rest, [(price or ANTHROPIC_RELATIVE).cost(c.usage) for c in calls])
    return [_with_cost(c, share) for c, share in zip(calls, shares, strict=True)]


def reconcile(
    messages: dict[str, Message],
    init_model: str | None,
    prices: PriceTable,
    result: dict[str, Any],
    now_ms: int,
    notes: list[str],
) -> list[ModelCall]:
    """Every call still to record once the session's ``result`` arrived: the messages not
    recorded yet, then the reconciliation rows, costed from one truth per model and never
    below zero (see the module docstring); ``notes`` collects what the attempt's details
    say, including the figures of the truth not taken."""
    calls: list[ModelCall] = []
    for group in _groups(messages, init_model, result, notes):
        calls.extend(_reconciled(group, prices, now_ms, notes))
    # Messages first, in stream order; then the reconciliation rows.
    order = {message_id: index for index, message_id in enumerate(messages)}
    calls.sort(
        key=lambda c: (c.kind != "model", order.get(str((c.detail or {}).get("message_id")), 0))
    )
    total_cost = reported_cost(result.get("total_cost_usd"), "the session")
    per_model = result.get("modelUsage")
    if total_cost is None or not isinstance(per_model, dict) or not per_model:
        return calls
    models_cost = sum(
        reported_cost(entry.get("costUSD"), str(name)) or 0.0
        for name, entry in per_model.items()
        if isinstance(entry, dict)
    )
    if total_cost - models_cost > 1e-9:
        calls.append(
            ModelCall(
                TokenUsage(),
                None,
                now_ms,
                now_ms,
                cost_usd=total_cost - models_cost,
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
