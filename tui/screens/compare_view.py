"""Two runs side by side (``=`` in Runs after marking one with ``m``, ``=`` on a run that
continues another, ``=`` in Handoffs): per node iteration, each run's state, tokens, cost and
duration, the rows that differ marked; below, the selected node's prompt as sent, memory
block and output as word diffs (removed words struck through in red, added words in green).

Any two runs compare: two runs of a workflow, two generations of a chain, a run and its fork.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from store.read.compare_reads import Comparison, Pair, Side, compare_runs, node_texts
from tui.format import duration, one_line, plural, spent, status_text, tokens
from tui.screens.live_screen import LiveScreen
from tui.tailing import Batch
from tui.widgets.keyed_table import KeyedTable
from tui.word_diff import comparable, diff_text, word_diff

COMPARE_COLUMNS = (
    ("mark", " "),
    ("node", "Node"),
    ("state_a", "State A"),
    ("state_b", "State B"),
    ("tokens_a", "Tokens A"),
    ("tokens_b", "Tokens B"),
    ("delta", "Δ tokens"),
    ("cost_a", "Cost A"),
    ("cost_b", "Cost B"),
    ("took_a", "Took A"),
    ("took_b", "Took B"),
)
DIFF_TABS = (("prompt", "Prompt"), ("memory", "Memory"), ("output", "Output"))


def side_cells(side: Side | None, now_ms: int) -> list[Text]:
    """One run's cells of a pair: state, tokens, cost, duration ("–" where it has no node)."""
    if side is None:
        return [Text("–", style="dim")] * 4
    state = Text("◆ cache hit", style="bold green") if side.node.cached else status_text(
        side.node.state)
    paid = spent(side.tokens.total, side.cost.usd, side.cost.unpriced_calls)
    return [state, Text(tokens(side.tokens.total), justify="right"),
            Text(paid, justify="right"),
            Text(duration(side.duration_ms(now_ms)), justify="right")]


def pair_mark(pair: Pair) -> Text:
    """``≠`` for a pair that differs, ``↳`` for one carried over (one recorded output)."""
    if pair.carried:
        return Text("↳", style="dim")
    return Text("≠", style="bold yellow") if pair.differs else Text(" ")


def pair_cells(pair: Pair, now_ms: int) -> list[Text]:
    """The cells of one compared node iteration."""
    a, b = side_cells(pair.a, now_ms), side_cells(pair.b, now_ms)
    delta = Text("", justify="right")
    if pair.a is not None and pair.b is not None:
        change = pair.b.tokens.total - pair.a.tokens.total
        if change:
            delta = Text(("+" if change > 0 else "-") + tokens(abs(change)), justify="right",
                         style="red" if change > 0 else "green")
    return [pair_mark(pair), one_line(pair.key),
            a[0], b[0], a[1], b[1], delta, a[2], b[2], a[3], b[3]]


def header_text(comparison: Comparison, now_ms: int) -> Text:
    """Which runs, how they are related, and their totals side by side."""
    a, b = comparison.a, comparison.b
    text = Text()
    text.append("A ", style="bold")
    text.append_text(one_line(a.run_id, "bold"))
    text.append(" ")
    text.append_text(status_text(a.status))
    text.append("   B ", style="bold")
    text.append_text(one_line(b.run_id, "bold"))
    text.append(" ")
    text.append_text(status_text(b.status))
    text.append("   ")
    text.append_text(one_line(comparison.relation, "dim"))
    text.append("\n")
    for label, run in (("A", a), ("B", b)):
        text.append(f"{label}: {tokens(run.tokens.total)} tokens, "
                    f"{spent(run.tokens.total, run.cost.usd, run.cost.unpriced_calls)}"
                    f", {duration(run.elapsed_ms(now_ms))}, nodes {run.nodes_done}/"
                    f"{run.nodes_total}   ")
    differing = sum(1 for p in comparison.pairs if p.differs)
    verb = "differs" if differing == 1 else "differ"
    text.append(f"{differing} of {plural(len(comparison.pairs), 'node iteration')} {verb}",
                style="yellow")
    carried = sum(1 for p in comparison.pairs if p.carried)
    if carried:
        text.append(f", {carried} carried over (↳, the same recorded output)", style="dim")
    return text


class CompareScreen(LiveScreen):
    """Two runs side by side (see the module docstring)."""

    MODE = "runs"
    FILTER_KEY = "compare"
    HELP_TITLE = "Compare runs"
    HELP_TEXT = (
        "Two runs side by side: each node iteration's state, tokens, cost and duration in run "
        "A and run B (≠ where they differ, ↳ where one carried the other's recorded output "
        "over). Below, the selected node's prompt as sent, its memory block and its output as "
        "word diffs: struck-through red words are only in A, "
        "green words only in B. d shows only the nodes that differ, s swaps A and B, [ and ] "
        "switch the diff tab."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("d", "only_differing", "Differing only"),
        Binding("s", "swap", "Swap A/B"),
        Binding("left_square_bracket", "tab(-1)", "Prev tab", show=False),
        Binding("right_square_bracket", "tab(1)", "Next tab", show=False),
    ]
    AUTO_FOCUS = "#compare-table"

    def __init__(self, run_a: str, run_b: str) -> None:
        super().__init__()
        self.run_a, self.run_b = run_a, run_b
        self.comparison: Comparison | None = None
        self.only_differing = False
        self._shown_pair: str | None = None

    def compose_view(self) -> ComposeResult:
        with Vertical(id="compare-body"):
            yield Static(id="compare-header")
            yield KeyedTable(COMPARE_COLUMNS, id="compare-table", stretch="node")
            with TabbedContent(id="compare-diffs"):
                for key, label in DIFF_TABS:
                    with TabPane(label, id=f"diff-{key}"), VerticalScroll():
                        yield Static(id=f"diff-{key}-text")

    def crumb(self) -> Text:
        text = Text("compare ")
        text.append_text(one_line(self.run_a, "bold"))
        text.append(" ↔ ")
        text.append_text(one_line(self.run_b, "bold"))
        return text

    def can_go_back(self) -> bool:
        return True

    async def refresh_data(self, batch: Batch) -> None:
        if not (batch.first_read or batch.touches(self.run_a) or batch.touches(self.run_b)):
            return
        reader = self.tether.reader
        if reader is None:
            return
        now = self.tether.now_ms()
        try:
            self.comparison = await compare_runs(reader, self.run_a, self.run_b)
        except Exception as error:  # a run deleted meanwhile: say so instead of a crash
            self.query_one("#compare-header", Static).update(Text(str(error), style="bold red"))
            return
        self.query_one("#compare-header", Static).update(header_text(self.comparison, now))
        pairs = [p for p in self.comparison.pairs if p.differs or not self.only_differing]
        table = self.query_one("#compare-table", KeyedTable)
        table.sync([(p.key, pair_cells(p, now)) for p in pairs])
        if table.cursor_key is not None and (batch.first_read or table.cursor_key !=
                                             self._shown_pair):
            await self._show_pair(table.cursor_key)
        self.update_chrome()

    async def _show_pair(self, key: str) -> None:
        reader = self.tether.reader
        if reader is None:
            return
        self._shown_pair = key
        a = await node_texts(reader, self.run_a, key)
        b = await node_texts(reader, self.run_b, key)
        try:
            for field, label in DIFF_TABS:
                diff = word_diff(comparable(a, field), comparable(b, field))
                text = Text(f"{label} of {key}: {diff.summary()}\n\n", style="bold")
                if diff.same:
                    text.append_text(Text(comparable(a, field) or "(none on either side)",
                                          style="dim"))
                else:
                    text.append_text(diff_text(diff))
                self.query_one(f"#diff-{field}-text", Static).update(text)
        except NoMatches:
            return  # closed while reading

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is not None and key != self._shown_pair:
            self.run_worker(self._show_pair(key), group="compare-diff", exclusive=True)

    async def action_only_differing(self) -> None:
        """Show only the node iterations that differ (again: all of them)."""
        self.only_differing = not self.only_differing
        await self.tether.refresh_screen(self)

    async def action_swap(self) -> None:
        """Swap run A and run B."""
        self.run_a, self.run_b = self.run_b, self.run_a
        self._shown_pair = None
        await self.tether.refresh_screen(self)

    def action_tab(self, step: int) -> None:
        """Switch the diff tab."""
        tabs = self.query_one("#compare-diffs", TabbedContent)
        panes = [f"diff-{key}" for key, _ in DIFF_TABS]
        if tabs.active in panes:
            tabs.active = panes[(panes.index(tabs.active) + step) % len(panes)]

    def action_back(self) -> None:
        """Back to where the comparison was opened from."""
        self.app.pop_screen()
