"""What the replay screen draws, as pure functions of a :class:`store.read.replay.ReplayState`:
the cursor's header, the run line as of the cursor, the context-window histogram and lanes of
the calls so far, the memory blocks recalled so far, the notes proposed so far, and the events
around the cursor. Stored strings go through :func:`tui.format.one_line` (never markup).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text

from store.model.history_records import EventRecord, MemoryBlockRecord
from store.model.token_lanes import TokenUsage
from store.read.dashboard_rows import BucketUsage
from store.read.replay import ReplayState
from store.read.replay_reads import NoteText
from tui.format import cost, one_line, plural, status_text, tokens
from tui.replay_text import event_words, header, moment, node_name
from tui.screens.run_detail_render import memory_cell, recalled_item_text

EVENTS_AROUND = 4
"""Events shown on each side of the cursor's."""
SHOWN_ITEMS = 10
"""Recalled items of the selected node's block listed (the run's Memory tab has them all)."""


def header_text(state: ReplayState, cut: bool = False, live: bool = False) -> Text:
    """``Replay 37/212 · 12:03:41.220 · node report ended: finished`` (``cut``: the log had
    more events than were read; ``live``: the run had not ended when it was read)."""
    text = one_line(header(state), "bold")
    if cut:
        text.append(f"  (the run's first {state.total} events)", style="yellow")
    if live:
        text.append("  (still running: the events up to when replay opened)", style="yellow")
    return text


def summary_text(state: ReplayState, nodes_total: int, workflow: str) -> Text:
    """The run as of the cursor: status, nodes ended, tokens, cost (read-only, said so)."""
    line = Text("REPLAY (read-only) ", style="bold reverse")
    line.append(" ")
    line.append_text(status_text(state.run_status))
    line.append("  ")
    line.append_text(one_line(workflow, "bold"))
    tokens_so_far = state.run_tokens
    line.append(
        f"   nodes ended {state.nodes_ended}/{nodes_total}  tokens {tokens(tokens_so_far.total)}"
        f" (fresh {tokens(tokens_so_far.input)}, cached {tokens(tokens_so_far.cache_read)}, "
        f"out {tokens(tokens_so_far.output)})  cost "
        f"{cost(state.run_cost.usd, state.run_cost.unpriced_calls)}"
    )
    return line


def histogram_text(buckets: Sequence[BucketUsage], width: int = 40) -> Text:
    """Calls so far per context-window bucket, as bars fitting ``width`` columns, then the
    lanes they add up to."""
    out = Text("Tokens so far\n", style="bold")
    calls = sum(b.calls for b in buckets)
    if not calls and not any(b.tokens.total for b in buckets):
        out.append("No model call yet.\n", style="dim")
        return out
    highest = max(b.calls for b in buckets) or 1
    room = max(4, min(24, width - 24))  # label 9, calls 5, tokens 8, spaces
    for bucket in buckets:
        bar = "█" * max(1, round(bucket.calls / highest * room)) if bucket.calls else ""
        out.append(f"{bucket.bucket:<9}{bucket.calls:>5} ")
        out.append(f"{bar:<{room}}", style="cyan")
        out.append(f" {tokens(bucket.tokens.total):>7}\n", style="dim")
    usage = bucket_total(buckets)
    out.append(f"{plural(calls, 'call')} · {tokens(usage.total)} tokens: fresh "
               f"{tokens(usage.input)}, cache read {tokens(usage.cache_read)}, cache write "
               f"{tokens(usage.cache_write)}, out {tokens(usage.output)}, reasoning "
               f"{tokens(usage.reasoning)}\n", style="dim")
    return out


def bucket_total(buckets: Sequence[BucketUsage]) -> TokenUsage:
    """The lanes of every bucket added up."""
    return TokenUsage.sum(b.tokens for b in buckets)


def memory_text(
    state: ReplayState, selected: str | None = None, block: MemoryBlockRecord | None = None
) -> Text:
    """The memory blocks recall had saved by the cursor's event, one line per node, then the
    recalled items of the ``selected`` node iteration's ``block`` when it had one by then."""
    out = Text(f"Memory blocks recalled so far: {len(state.blocks)}\n", style="bold")
    for seen in state.blocks:
        summary = seen.summary
        out.append("  ")
        out.append_text(one_line(node_name(summary.node_id, summary.iteration)))
        out.append(f" · {plural(seen.items, 'item')} · ")
        out.append_text(memory_cell(summary))
        if summary.warning and not summary.degraded and summary.bytes_used:
            out.append(" · ")
            out.append_text(one_line(summary.warning, "dim", width=60))
        out.append("\n")
    if selected is not None and selected in state.memory and block is not None:
        out.append("\nBlock of ", style="bold")
        out.append_text(one_line(selected, "bold"))
        out.append(f" ({block.bytes_used} of {block.budget_bytes} bytes)\n", style="bold")
        items = block.item_dicts
        if not items:
            out.append_text(one_line(block.warning or "nothing was recalled", "dim"))
            out.append("\n")
        for index, item in enumerate(items[:SHOWN_ITEMS], start=1):
            out.append_text(recalled_item_text(index, item, block.query))
        if len(items) > SHOWN_ITEMS:
            out.append(f"… {len(items) - SHOWN_ITEMS} more (the run's Memory tab)\n",
                       style="dim")
    return out


def notes_panel_text(state: ReplayState, notes: Mapping[str, NoteText]) -> Text:
    """The notes the run had proposed for review by the cursor's event (their text as stored,
    and their status now when it has changed since)."""
    pending = state.pending_notes
    out = Text(f"Pending notes proposed so far: {len(pending)}\n", style="bold")
    written = len(state.notes) - len(pending)
    if written:
        out.append(f"  (and {plural(written, 'note')} written as accepted)\n", style="dim")
    for note in pending:
        stored = notes.get(note.note_id)
        out.append("  ")
        out.append_text(one_line(note.note_id, "cyan"))
        out.append(" from ")
        out.append_text(one_line(note.node_key or "the run"))
        if stored is not None and stored.status != note.status:
            out.append(f" (now {stored.status})", style="dim")
        out.append(": ")
        out.append_text(one_line(stored.body if stored else "(note deleted since)", width=80))
        out.append("\n")
    return out


def events_text(events: Sequence[EventRecord], position: int) -> Text:
    """The events around the cursor's (1-based ``position``), the cursor's marked."""
    out = Text()
    low = max(1, position - EVENTS_AROUND)
    high = min(len(events), position + EVENTS_AROUND)
    for index in range(low, high + 1):
        event = events[index - 1]
        line = f"{moment(event.at_ms)}  {event_words(event)}"
        style = "bold reverse" if index == position else ("dim" if index > position else "")
        out.append("▶" if index == position else " ", style="bold yellow")
        out.append(f"{index:>6}  ", style=style)
        out.append_text(one_line(line, style))
        if index < high:
            out.append("\n")
    return out
