"""Why did this run cost so much (``$`` on a Runs row): a few sentences first (the costliest
node and its share, what retried attempts cost, the costliest call and its context window,
the cache-read share, the models), then the run's nodes by cost with a share bar and what
their retries cost, and its costliest calls. ``enter`` on a node opens it in the run view.
The same numbers as ``tether cost RUN``.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from store.read.usage_reads import CostBreakdown, NodeCost, run_breakdown
from tui.cost_story import why_sentences
from tui.format import call_cost, cost, one_line, percent, status_text, tokens
from tui.screens.live_screen import LiveScreen
from tui.tailing import Batch
from tui.widgets.keyed_table import KeyedTable

NODE_COST_COLUMNS = (
    ("node", "Node"),
    ("state", "State"),
    ("cost", "Cost"),
    ("share", "Share"),
    ("bar", ""),
    ("retried", "Retried"),
    ("attempts", "Att"),
    ("calls", "Calls"),
    ("tokens", "Tokens"),
)
CALL_COST_COLUMNS = (
    ("call", "Call"),
    ("where", "Node / attempt"),
    ("model", "Model"),
    ("context", "Context"),
    ("cost", "Cost"),
)
BAR_CELLS = 12


def node_cost_cells(node: NodeCost, total: float, total_tokens: int) -> list[Text]:
    """One node's row: its cost, its share of the run with a bar (of the tokens when nothing
    had a price above $0), what its retries cost."""
    if total:
        share = (node.cost.usd or 0.0) / total
    else:
        share = node.tokens.total / total_tokens if total_tokens else 0.0
    return [
        one_line(node.key),
        status_text(node.state),
        Text(cost(node.cost.usd, node.cost.unpriced_calls), justify="right"),
        Text(percent(share) + ("" if total else " tok"), justify="right"),
        Text("█" * round(share * BAR_CELLS), style="yellow"),
        Text(cost(node.retried_usd) if node.retried_usd else "–", justify="right",
             style="red" if node.retried_usd else "dim"),
        Text(str(node.attempts), justify="right"),
        Text(str(node.calls), justify="right"),
        Text(tokens(node.tokens.total), justify="right"),
    ]


def story_text(found: CostBreakdown) -> Text:
    """The total and the sentences that explain it."""
    text = Text()
    text.append(f"{cost(found.total.usd, found.total.unpriced_calls)} · "
                f"{tokens(found.tokens.total)} tokens\n", style="bold")
    for sentence in why_sentences(found):
        text.append("• ")
        text.append_text(one_line(sentence))
        text.append("\n")
    return text


class CostScreen(LiveScreen):
    """Where one run's money went (see the module docstring)."""

    MODE = "runs"
    FILTER_KEY = "cost"
    HELP_TITLE = "Why did this run cost so much"
    HELP_TEXT = (
        "The run's cost explained: the costliest node and its share, what retried attempts "
        "cost before they were retried, the costliest call with its context window, how much "
        "of the context came from the prompt cache, and the models used. Below, every node by "
        "cost and the costliest calls. enter opens the node in the run view."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("enter", "open_node", "Open node"),
    ]
    AUTO_FOCUS = "#cost-nodes"

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.found: CostBreakdown | None = None

    def compose_view(self) -> ComposeResult:
        with Vertical(id="cost-body"):
            yield Static(id="cost-story")
            with Horizontal(id="cost-tables"):
                yield KeyedTable(NODE_COST_COLUMNS, id="cost-nodes", stretch="node")
                yield KeyedTable(CALL_COST_COLUMNS, id="cost-calls", stretch="where")

    def on_mount(self) -> None:
        # Textual calls each base class's on_mount too (most derived first): no super().
        self.query_one("#cost-nodes", KeyedTable).border_title = "Nodes by cost"
        self.query_one("#cost-calls", KeyedTable).border_title = "Costliest calls"

    def on_resize(self) -> None:
        # Below 120 columns the two tables go one above the other, each at full width.
        self.query_one("#cost-tables").set_class(self.size.width < 120, "-stacked")

    def crumb(self) -> Text:
        text = Text("cost of run ")
        text.append_text(one_line(self.run_id, "bold"))
        return text

    def can_go_back(self) -> bool:
        return True

    async def refresh_data(self, batch: Batch) -> None:
        if not (batch.first_read or batch.touches(self.run_id)):
            return
        reader = self.tether.reader
        if reader is None:
            return
        self.found = found = await run_breakdown(reader, self.run_id)
        self.query_one("#cost-story", Static).update(story_text(found))
        total = found.total.usd or 0.0
        self.query_one("#cost-nodes", KeyedTable).sync(
            [(n.key, node_cost_cells(n, total, found.tokens.total)) for n in found.nodes])
        self.query_one("#cost-calls", KeyedTable).sync([
            (str(c.call_id), [
                Text(str(c.call_id), justify="right"),
                one_line(f"{c.node_id}#{c.iteration} / {c.attempt}"),
                one_line(c.model or "–"),
                Text(tokens(c.context_tokens), justify="right"),
                Text(call_cost(c), justify="right"),
            ]) for c in found.top_calls
        ])
        self.update_chrome()

    def action_open_node(self) -> None:
        """Open the selected node (or the call's node) in the run view."""
        key = self.query_one("#cost-nodes", KeyedTable).cursor_key
        self.tether.open_run(self.run_id, node_key=key)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "cost-nodes":
            self.action_open_node()

    def action_back(self) -> None:
        """Back to the Runs list."""
        self.app.pop_screen()
