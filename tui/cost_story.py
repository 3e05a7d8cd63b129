"""Why a run cost what it did, in a few sentences a person reads first (pure): the Runs view's
``$`` drill-down and ``tether cost`` say the same, from :func:`store.read.usage_reads.breakdown`.
"""

from __future__ import annotations

from store.model.buckets import bucket_for
from store.read.usage_reads import CostBreakdown
from tui.plain import money, plural


def why_sentences(found: CostBreakdown) -> list[str]:
    """A few sentences that say why the run cost what it did (pure)."""
    total = found.total.usd or 0.0
    if not found.nodes:
        return ["The run made no model call: it cost nothing."]
    out: list[str] = []
    first = found.nodes[0]
    if total > 0:
        share = (first.cost.usd or 0.0) / total
        out.append(
            f"Node {first.key} cost {money(first.cost.usd or 0.0)}, {share:.0%} of the run's "
            f"{money(total)}, over {plural(first.calls, 'call')} and "
            f"{plural(first.attempts, 'attempt')}."
        )
    elif found.total.usd is None:
        out.append(f"No call had a known price; node {first.key} used the most tokens "
                   f"({first.tokens.total:,}).")
    else:
        out.append(f"Every call was priced at $0; node {first.key} used the most tokens "
                   f"({first.tokens.total:,}).")
    if found.retried_usd > 0:
        out.append(f"Retried attempts cost {money(found.retried_usd)} "
                   f"({found.retried_usd / total:.0%} of the run) before their retries.")
    if found.top_calls:
        call = found.top_calls[0]
        spent = money(call.cost_usd) if call.cost_usd is not None else "an unknown amount"
        costliest = "costliest" if total > 0 else "largest"
        out.append(
            f"The {costliest} call (#{call.call_id}, {call.node_id}#{call.iteration}, attempt "
            f"{call.attempt}) carried {call.context_tokens:,} tokens of context "
            f"({bucket_for(call.context_tokens)}) and cost {spent}."
        )
    context = found.tokens.context_tokens
    if context:
        out.append(f"{found.tokens.cached_share:.0%} of the context was read from the prompt "
                   f"cache ({found.tokens.cache_read:,} of {context:,} tokens).")
    if len(found.models) > 1:
        name, _tokens, model_cost = found.models[0]
        out.append(f"Model {name} cost the most ({money(model_cost.usd or 0.0)}) of "
                   f"{len(found.models)} models used.")
    if found.total.unpriced_calls:
        out.append(f"{plural(found.total.unpriced_calls, 'call')} had no known price; the total "
                   "leaves them out.")
    return out
