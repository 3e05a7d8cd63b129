"""A run's fork chain (``o`` in Runs or in a run): the first run of the family and every fork
below it as a tree, forks of forks indented under the fork they came from, each with the node
it was forked from, its edit kind and what it carried over; below, the selected fork's edit
as recorded (the prompt, the memory block, the agent, whether the input changed), literally.
``enter`` opens the run, ``=`` compares it with the run it was forked from.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from store.read.fork_chain import MAX_FAMILY, ChainLink, ForkChain, read_fork_chain
from tui.fork_chain_text import fork_words, tree_prefix
from tui.format import literal, one_line, plural, spent, status_text, tokens
from tui.screens.live_screen import LiveScreen
from tui.tailing import Batch
from tui.widgets.filter_bar import matches
from tui.widgets.keyed_table import KeyedTable

CHAIN_COLUMNS = (
    ("run", "Run"),
    ("status", "Status"),
    ("fork", "Forked from · edit · carried"),
    ("tokens", "Tokens"),
    ("cost", "Cost"),
)


def chain_table_rows(chain: ForkChain, needle: str) -> list[tuple[str, list[Text]]]:
    """One row per run of the chain, the tree drawn before its id (the run asked for bold)."""
    rows = []
    for link in chain.links:
        run = link.run
        if not matches(needle, run.run_id, run.fork_node or "", fork_words(link)):
            continue
        name = Text(tree_prefix(link), style="dim")
        name.append(("↳ " if link.depth else "") + run.run_id,
                    style="bold" if run.run_id == chain.asked else "")
        paid = spent(run.tokens.total, run.cost.usd, run.cost.unpriced_calls)
        rows.append((run.run_id, [name, status_text(run.status),
                                  one_line(fork_words(link)),
                                  Text(tokens(run.tokens.total), justify="right"),
                                  Text(paid, justify="right")]))
    return rows


def fork_detail(link: ChainLink) -> Text:
    """The selected run's place in the chain and its edit as recorded, literally."""
    run = link.run
    out = Text()
    out.append_text(one_line(run.run_id, "bold"))
    out.append(f" · {run.workflow} · ", style="dim")
    out.append_text(status_text(run.status))
    out.append("\n")
    fork = run.fork or {}
    if run.forked_from is None:
        out.append("The first run of this chain: it is no fork.\n", style="dim")
        return out
    out.append("forked from ", style="dim")
    out.append_text(one_line(run.forked_from))
    out.append(" at node ", style="dim")
    out.append_text(one_line(run.fork_node or "?", "bold"))
    carried = fork.get("carried") or []
    out.append(f"; {plural(len(carried), 'node iteration')} carried over\n", style="dim")
    if not any(k in fork for k in ("prompt", "memory_block", "agent")) and not fork.get(
            "input_edited"):
        out.append("No edit: the node ran again as it was.\n", style="dim")
    if "agent" in fork:
        out.append("agent: ", style="dim")
        out.append_text(one_line(str(fork["agent"])))
        out.append("\n")
    if fork.get("input_edited"):
        out.append("the run input was edited\n", style="dim")
    for key, label in (("prompt", "Prompt"), ("memory_block", "Memory block")):
        if isinstance(fork.get(key), str):
            out.append(f"\n{label} as edited\n", style="bold")
            out.append_text(literal(fork[key]))
            out.append("\n")
    return out


class ForkChainScreen(LiveScreen):
    """A run's fork family as a tree (see the module docstring)."""

    MODE = "runs"
    FILTER_KEY = "fork-chain"
    HELP_TITLE = "Fork chain"
    HELP_TEXT = (
        "The run's fork chain: the first run, then every fork of it (b in a run, or tether "
        "fork) under the run it was forked from, forks of forks indented further; each with "
        "the node it was forked from, what was edited (prompt, memory block, agent, input) and "
        "how many node iterations it carried over. Below, the selected fork's edit as "
        "recorded. enter opens the run, = compares it with the run it was forked from."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("enter", "open_run", "Open run"),
        Binding("equals_sign", "compare", "Compare with origin"),
    ]
    AUTO_FOCUS = "#chain-table"

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.chain: ForkChain | None = None
        self.links: dict[str, ChainLink] = {}
        self._placed = False

    def compose_view(self) -> ComposeResult:
        with Vertical(id="chain-body"):
            yield Static(id="chain-header")
            yield KeyedTable(CHAIN_COLUMNS, id="chain-table", stretch="fork")
            yield VerticalScroll(Static(id="chain-detail"), id="chain-detail-box")

    def crumb(self) -> Text:
        text = Text("fork chain of ")
        text.append_text(one_line(self.run_id, "bold"))
        return text

    def can_go_back(self) -> bool:
        return True

    async def refresh_data(self, batch: Batch) -> None:
        reader = self.tether.reader
        if reader is None:
            return
        if not batch.first_read and not any(
            e.type.startswith("run.") or e.run_id in self.links for e in batch.events
        ):
            return
        header = self.query_one("#chain-header", Static)
        try:
            chain = await read_fork_chain(reader, self.run_id)
        except Exception as error:  # the run was deleted meanwhile: say so, do not crash
            header.update(Text(str(error), style="bold red"))
            return
        self.chain = chain
        self.links = {link.run.run_id: link for link in chain.links}
        forks = len(chain.links) - 1
        line = Text(f"{plural(len(chain.links), 'run')} in the chain, "
                    f"{plural(forks, 'fork')}", style="bold")
        if chain.cut:
            line.append(f" (more than {MAX_FAMILY}: the first {MAX_FAMILY} are shown)",
                        style="yellow")
        header.update(line)
        table = self.query_one(KeyedTable)
        table.sync(chain_table_rows(chain, self.filter_text))
        if not self._placed:  # once: coming back to the view keeps the cursor where it was
            self._placed = table.select_key(self.run_id)
        self._show_detail()
        self.update_chrome()

    def _selected(self) -> ChainLink | None:
        key = self.query_one(KeyedTable).cursor_key
        return self.links.get(key) if key else None

    def _show_detail(self) -> None:
        link = self._selected()
        detail = self.query_one("#chain-detail", Static)
        detail.update(fork_detail(link) if link is not None else Text(""))

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def on_data_table_row_selected(self, _event: DataTable.RowSelected) -> None:
        self.action_open_run()

    def action_open_run(self) -> None:
        """Open the selected run."""
        link = self._selected()
        if link is not None:
            self.tether.open_run(link.run.run_id)

    def action_compare(self) -> None:
        """The selected fork beside the run it was forked from."""
        link = self._selected()
        if link is None or link.run.forked_from is None:
            self.app.notify("The first run of a chain is no fork; select a fork to compare "
                            "it with its origin.", timeout=6)
            return
        self.tether.open_compare(link.run.forked_from, link.run.run_id)

    def action_back(self) -> None:
        """Back to where the chain was opened from."""
        self.app.pop_screen()
