"""View ``4``: chains of runs linked by handoffs (durable ``/clear``).

One row per handoff, grouped by chain and ordered by generation; the panel below shows the
selected handoff's reason and the distilled state the next run started from.
"""

from __future__ import annotations

import json
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from store.model.history_records import HandoffRecord
from store.read.dashboard_rows import HandoffChain
from tui.format import literal, one_line, plural, tokens
from tui.screens.live_screen import LiveScreen
from tui.tailing import Batch
from tui.widgets.filter_bar import matches
from tui.widgets.keyed_table import KeyedTable

HANDOFF_COLUMNS = (
    ("chain", "Chain"),
    ("gen", "Gen"),
    ("from", "From run"),
    ("to", "To run"),
    ("reason", "Reason"),
    ("bytes", "Carried"),
)


def reason_text(handoff: HandoffRecord) -> Text:
    """Why the run handed off: what triggered it (a breached ceiling or a person), then the
    reason as recorded, said once (the recorded reason usually names the ceiling already)."""
    text = Text()
    if handoff.trigger == "ceiling":
        text.append("ceiling", style="yellow")
        fallback = "token ceiling breached"
        if handoff.tokens_at_handoff:
            fallback += f" at {tokens(handoff.tokens_at_handoff)} tokens"
    else:
        text.append("person", style="cyan")
        fallback = "cleared by a person"
    text.append(" · ", style="dim")
    text.append_text(literal(handoff.reason or fallback, keep_newlines=False))
    return text


def chain_rows(chains: list[HandoffChain], needle: str) -> list[tuple[str, list[Text]]]:
    """Table rows for the chains: one per handoff, with a tree glyph showing the chain."""
    rows: list[tuple[str, list[Text]]] = []
    for number, chain in enumerate(chains, start=1):
        if not matches(needle, *chain.run_ids, *(h.reason for h in chain.handoffs)):
            continue
        last = len(chain.handoffs) - 1
        for index, handoff in enumerate(chain.handoffs):
            glyph = "┌" if index == 0 else ("└" if index == last else "├")
            if last == 0:
                glyph = "─"
            rows.append(
                (
                    str(handoff.handoff_id),
                    [
                        Text(f"{glyph} #{number}", style="bold" if index == 0 else "dim"),
                        Text(f"{handoff.generation - 1}→{handoff.generation}", justify="right"),
                        one_line(handoff.from_run_id),
                        one_line(handoff.to_run_id or "(not started)"),
                        reason_text(handoff),
                        Text(f"{handoff.carried_bytes:,} B", justify="right"),
                    ],
                )
            )
    return rows


def handoff_detail(handoff: HandoffRecord) -> Text:
    """The selected handoff: generation, reason, bytes and the carried state, literally."""
    out = Text()
    out.append(
        f"Handoff {handoff.handoff_id} · generation {handoff.generation - 1} → "
        f"{handoff.generation} (the generation of the run it started)\n",
        style="bold",
    )
    out.append_text(reason_text(handoff))
    out.append(f"\ncarried {plural(handoff.carried_bytes, 'byte')} of distilled state\n\n",
               style="dim")
    state = handoff.carried_state
    rendered = (
        json.dumps(state, indent=2, ensure_ascii=False)
        if not isinstance(state, str)
        else state
    )
    out.append_text(literal(rendered))
    return out


class HandoffsScreen(LiveScreen):
    """Chains of runs linked by handoffs, with the state each handoff carried."""

    MODE = "handoffs"
    FILTER_KEY = "handoffs"
    HELP_TITLE = "Handoffs"
    HELP_TEXT = (
        "A handoff (durable /clear) stops a run and continues its work in a fresh run that "
        "carries only distilled state: goal, generation, last summary, a few learnings. It "
        "happens when a token ceiling is breached or when a person clears the run. enter opens "
        "the run the selected handoff continued into; = compares it with the run it continued "
        "(per node: state, tokens, cost, duration, and word diffs of prompt, memory, output)."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("enter", "open_run", "Open next run"),
        Binding("equals_sign", "compare", "Compare generations"),
    ]
    AUTO_FOCUS = "#handoffs-table"

    def __init__(self) -> None:
        super().__init__()
        self.handoffs: dict[str, HandoffRecord] = {}

    def compose_view(self) -> ComposeResult:
        with Vertical(id="handoffs-body"):
            yield KeyedTable(HANDOFF_COLUMNS, id="handoffs-table", stretch="reason")
            yield VerticalScroll(Static(id="handoff-detail"), id="handoff-detail-box")

    def crumb(self) -> Text:
        return Text(plural(len(self.handoffs), "handoff"))

    async def refresh_data(self, batch: Batch) -> None:
        reader = self.tether.reader
        if reader is None:
            return
        if batch.events and not batch.first_read and not any(
            e.type.startswith(("handoff", "run.")) for e in batch.events
        ):
            return
        chains = await reader.handoff_chains()
        self.handoffs = {str(h.handoff_id): h for c in chains for h in c.handoffs}
        table = self.query_one(KeyedTable)
        table.sync(chain_rows(chains, self.filter_text))
        self._show_detail()
        self.update_chrome()

    def _show_detail(self) -> None:
        key = self.query_one(KeyedTable).cursor_key
        detail = self.query_one("#handoff-detail", Static)
        handoff = self.handoffs.get(key) if key else None
        if handoff is None:
            detail.update(
                Text.assemble(
                    ("No handoffs yet.\n\n", "bold"),
                    "This view shows chains of runs linked by a durable /clear: a run stops and "
                    "a fresh run continues with only its distilled state. It happens when a "
                    "token ceiling is breached (on_exceeded=\"handoff\") or when a person "
                    "clears a run: ", ("x", "bold"), " in ", ("1", "bold"), " Runs, or ",
                    ("tether clear RUN", "bold"), ".",
                )
            )
        else:
            detail.update(handoff_detail(handoff))

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def on_data_table_row_selected(self, _event: DataTable.RowSelected) -> None:
        self.action_open_run()

    def action_open_run(self) -> None:
        """Open the run the selected handoff continued into (or came from)."""
        key = self.query_one(KeyedTable).cursor_key
        handoff = self.handoffs.get(key) if key else None
        if handoff is not None:
            self.tether.open_run(handoff.to_run_id or handoff.from_run_id)

    def action_compare(self) -> None:
        """The two generations of the selected handoff side by side."""
        key = self.query_one(KeyedTable).cursor_key
        handoff = self.handoffs.get(key) if key else None
        if handoff is not None and handoff.to_run_id:
            self.tether.open_compare(handoff.from_run_id, handoff.to_run_id)
