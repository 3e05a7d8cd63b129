"""What the run view draws, as pure functions of the dashboard's read model: the rows of
its node, attempt and call tables, and the memory block of a node (each recalled item with its
source, namespace, score and why it was picked). Every stored string goes through
:func:`tui.format.literal` / :func:`tui.format.one_line` (never markup); tested directly.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from store.model.history_records import MemoryBlockRecord
from store.model.run_records import AttemptRecord, CallRecord, NodeRecord
from store.read.dashboard_rows import MemorySummary, NodeUsage
from tui.format import (
    call_cost,
    duration,
    literal,
    one_line,
    percent,
    plural,
    row_cost,
    status_text,
    tokens,
)
from tui.recall_words import readable_why

NODE_COLUMNS = (
    ("state", "State"),
    ("node", "Node"),
    ("iter", "Iter"),
    ("attempt", "Attempt"),
    ("elapsed", "Elapsed"),
    ("calls", "Calls"),
    ("tokens", "Tokens"),
    ("cost", "Cost"),
    ("cached", "Cached"),
    ("hit", "Reused"),
    ("memory", "Memory"),
)

ATTEMPT_COLUMNS = (
    ("attempt", "#"),
    ("state", "State"),
    ("agent", "Agent"),
    ("model", "Model"),
    ("host", "Ran on"),
    ("elapsed", "Elapsed"),
    ("tokens", "Tokens"),
    ("cost", "Cost"),
    ("error", "Error"),
)

CALL_COLUMNS = (
    ("call", "Call"),
    ("attempt", "Att"),
    ("agent", "Agent / model"),
    ("context", "Context"),
    ("bucket", "Bucket"),
    ("fresh", "Fresh in"),
    ("cache_read", "Cache read"),
    ("cache_write", "Cache write"),
    ("output", "Output"),
    ("reasoning", "Reasoning"),
    ("cost", "Cost"),
    ("took", "Took"),
)


def node_cells(
    node: NodeRecord,
    usage: NodeUsage | None,
    memory: MemorySummary | None,
    now_ms: int,
    warned: bool = False,
) -> list[Text]:
    """The cells of one node-table row (``warned``: an attempt recorded warnings, shown as ⚠
    beside the state)."""
    state = status_text(node.state)
    if warned:
        state.append(" ⚠", style="bold yellow")
    return [
        state,
        one_line(node.node_id),
        Text(str(node.iteration), justify="right"),
        Text(str(node.attempts), justify="right"),
        Text(duration(node.elapsed_ms(now_ms)), justify="right"),
        Text(str(usage.calls if usage else 0), justify="right"),
        Text(tokens(usage.tokens.total if usage else 0), justify="right"),
        Text(row_cost(usage) if usage else "–", justify="right"),
        Text(percent(usage.tokens.cached_share) if usage and usage.tokens.context_tokens else "–",
             justify="right"),
        reuse_cell(node),
        memory_cell(memory),
    ]


def reuse_cell(node: NodeRecord) -> Text:
    """``HIT`` for a task-cache hit, ``carried`` for a node an earlier generation finished."""
    if node.carried_from:
        return Text("carried", style="bold cyan")
    return Text("HIT", style="bold green") if node.cached else Text("")


def no_block_reason(warning: str | None) -> str:
    """Why recall injected nothing, in a word or two, for a block that was not degraded."""
    text = warning or ""
    if "matched" in text:
        return "no matches"
    if "recall is off" in text:
        return "recall off"
    if "fitted" in text:
        return "none fitted"
    return "no block"


def memory_cell(memory: MemorySummary | None) -> Text:
    """The node table's memory cell: bytes used of the budget, ``cut`` when truncated, ``⚠``
    only when recall degraded (timed out or failed); an empty bank reads "no matches"."""
    if memory is None:
        return Text("–", style="dim")
    if memory.degraded:
        return Text("⚠ degraded", style="bold yellow")
    if not memory.bytes_used:
        return Text(no_block_reason(memory.warning), style="dim")
    cell = Text(f"{tokens(memory.bytes_used)}B/{tokens(memory.budget_bytes)}B")
    if memory.truncated:
        cell.append(" cut", style="yellow")
    return cell


def attempt_warnings(attempt: AttemptRecord) -> list[str]:
    """The warnings an attempt recorded (a memory tool call that did not run, ...)."""
    details = attempt.details if isinstance(attempt.details, dict) else {}
    warnings = details.get("warnings")
    return [str(w) for w in warnings] if isinstance(warnings, list) else []


def attempt_cells(attempt: AttemptRecord) -> list[Text]:
    """The cells of one attempts-table row (a warning shows in the error column when there is
    no error)."""
    elapsed = (
        duration(attempt.finished_at_ms - attempt.started_at_ms)
        if attempt.finished_at_ms is not None
        else "…"
    )
    details = attempt.details if isinstance(attempt.details, dict) else {}
    stopped = details.get("stopped_by") == "budget"
    warnings = attempt_warnings(attempt)
    error = one_line(attempt.error or "", "red")
    if not attempt.error and warnings:
        error = Text(f"⚠ {plural(len(warnings), 'warning')}: ", style="bold yellow")
        error.append_text(one_line(warnings[0], "yellow"))
    return [
        Text(str(attempt.attempt), justify="right"),
        Text("stopped: budget", style="bold red") if stopped else status_text(attempt.state),
        one_line(attempt.agent or "–"),
        one_line(attempt.model or "–"),
        one_line(attempt.ran_on, "" if attempt.executor else "dim", width=40),
        Text(elapsed, justify="right"),
        Text(tokens(attempt.tokens.total), justify="right"),
        Text(row_cost(attempt), justify="right"),
        error,
    ]


def call_cells(call: CallRecord) -> list[Text]:
    """The cells of one calls-table row."""
    agent = one_line(call.agent)
    if call.model:
        agent.append(" / ")
        agent.append_text(one_line(call.model))
    if call.simulated:
        agent.append(" (simulated)", style="dim")
    if call.kind == "retry":
        status = call.detail.get("status") if isinstance(call.detail, dict) else None
        agent.append(f" retry{f' HTTP {status}' if status else ''}", style="yellow")
    detail = call.detail if isinstance(call.detail, dict) else {}
    if detail.get("aggregate"):
        # A whole turn (several model requests): no context window, so no bucket.
        agent.append(" (turn total: not one call)", style="yellow")
    elif call.kind == "reconciliation":
        agent.append(" (session totals)", style="dim")
    unknown = detail.get("usage") == "not reported"
    if unknown:
        agent.append(" (usage not reported)", style="yellow")
    lanes = [Text("?" if unknown else tokens(lane), justify="right") for lane in call.tokens]
    return [
        Text(str(call.call_id), justify="right"),
        Text(str(call.attempt), justify="right"),
        agent,
        Text("?" if unknown else tokens(call.context_tokens), justify="right"),
        Text("–", style="dim") if detail.get("aggregate") or unknown else literal(call.bucket),
        *lanes,
        Text(call_cost(call), justify="right"),
        Text(duration(call.finished_at_ms - call.started_at_ms), justify="right"),
    ]


def memory_block_text(block: MemoryBlockRecord | None) -> Text:
    """Everything the dashboard knows about a node's memory block, as literal text."""
    if block is None:
        return Text("No memory block: recall was off for this node or has not run yet.",
                    style="dim")
    out = Text()
    if block.degraded:
        out.append("⚠ ", style="bold yellow")
        out.append_text(literal(block.warning or "recall degraded", "bold yellow"))
        out.append("\n")
    elif block.warning:
        # Not a problem: recall ran and found nothing (or was off); said plainly.
        out.append_text(literal(block.warning, "dim"))
        out.append("\n")
    used = Text(f"{block.bytes_used} of {block.budget_bytes} bytes used")
    if block.truncated:
        used.append(" — truncated to fit the budget", style="yellow")
    out.append_text(used)
    if block.duration_ms is not None:
        out.append(f" · recall took {block.duration_ms} ms", style="dim")
    out.append("\n")
    if block.banks:
        out.append("banks: ", style="dim")
        out.append_text(literal(", ".join(block.banks)))
        out.append("\n")
    if block.query:
        out.append("query: ", style="dim")
        out.append_text(one_line(block.query, width=400))
        out.append("\n")
    items = block.item_dicts
    out.append(f"\n{plural(len(items), 'recalled item')}\n", style="bold")
    for index, item in enumerate(items, start=1):
        out.append_text(recalled_item_text(index, item, block.query))
    out.append("\nBlock as injected before the prompt\n", style="bold")
    if block.text:
        out.append_text(literal(block.text))
    else:
        out.append("(nothing injected)", style="dim")
    return out


def recalled_item_text(index: int, item: dict[str, Any], query: str | None = None) -> Text:
    """One recalled item: id, source, namespace, score, why it was picked (in the words of
    ``query``, the block's), then its text."""
    line = Text()
    line.append(f"{index:>2}. ", style="bold")
    line.append_text(one_line(item.get("id", item.get("value", "?"))))
    source = item.get("source")
    if source:
        line.append(" · ", style="dim")
        line.append_text(one_line(source, "cyan"))
    if item.get("namespace"):
        line.append(" · ", style="dim")
        line.append_text(one_line(item["namespace"]))
    if item.get("key"):
        line.append(" · key ", style="dim")
        line.append_text(one_line(item["key"]))
    score = item.get("score")
    if isinstance(score, int | float):
        line.append(f" · score {score:.3f}", style="green")
    line.append("\n")
    why = readable_why(item, query)
    tags = item.get("tags")
    if why or tags:
        line.append("    why: ", style="dim")
        line.append_text(one_line(why or "tag match", width=200))
        line.append("\n")
    if isinstance(tags, list) and tags:
        # On a line of its own: after a long why it wrapped to the left edge.
        line.append("    tags: ", style="dim")
        line.append_text(one_line(", ".join(str(t) for t in tags)))
        line.append("\n")
    body = item.get("text") or item.get("body")
    if body:
        line.append("    ")
        line.append_text(one_line(body, width=300))
        line.append("\n")
    return line
