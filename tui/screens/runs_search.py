"""``/`` in the Runs view: search every run of the workspace with the run query language
(:mod:`store.read.run_query`, the one ``tether runs --where`` takes) instead of filtering the
rows on screen, and the saved filters (``F`` picks one, ``S`` saves the one in effect).

A query that does not parse is refused with its one sentence and the filter in effect stays.
Structured queries are re-run as the data moves (a few milliseconds over 10 000 runs); a
full-text condition scans a bounded window (prompts, outputs, logs), so it runs when applied
and the rows it found are kept up to date in place, the crumb saying when it ran and what it
covered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding

from store.errors import InvalidInputError
from store.model.run_records import RunRecord
from tui.actions.feedback import write_safely
from tui.actions.run_actions import RunControlScreen
from tui.format import literal, visible
from tui.plain import plural
from tui.tailing import Batch
from tui.widgets.filter_bar import FilterBar

if TYPE_CHECKING:
    # The query language, the search, the saved filters and their dialogs are imported when a
    # filter is first used: the Runs view's first paint (no filter yet) does not wait for them.
    from store.read.run_query import Query
    from store.read.run_search import RunSearch

SEARCH_LIMIT = 200
"""The Runs list shows at most this many matching runs (newest first); the crumb counts all."""
RESHAPING = frozenset({"run.created", "run.deleted", "run.status", "run.queued"})


class RunSearchScreen(RunControlScreen):
    """A run list searched with the query language (the base of the Runs view)."""

    BINDINGS: ClassVar[list[Binding]] = [
        Binding("F", "saved_filters", "Saved filters"),
        Binding("S", "save_filter", "Save filter"),
    ]
    KEY_NOTES: ClassVar[dict[str, str]] = {
        **RunControlScreen.KEY_NOTES,
        "save_filter": "while a filter is in effect (press / first)",
    }

    search: RunSearch | None = None
    """The last search run (None while no filter is in effect)."""
    _searched_text: str = ""
    _searched_at_ms: int = 0

    def parsed_filter(self) -> Query | None:
        """The filter in effect as a query (None when there is none or it no longer parses)."""
        if not self.filter_text:
            return None
        from store.read.run_query import parse_query

        try:
            return parse_query(self.filter_text, self.tether.now_ms())
        except InvalidInputError:
            return None

    async def searched_runs(self, batch: Batch) -> list[RunRecord] | None:
        """The runs the filter matches (None to keep the rows shown and patch them in place:
        a full-text search found them when applied)."""
        reader = self.tether.reader
        query = self.parsed_filter()
        if reader is None or query is None:
            self.search = None
            return []
        again = batch.first_read or self._searched_text != self.filter_text
        if query.scans_text and not again:
            return None
        from store.read.run_search import search_runs
        from tui.timeline_tools import log_source_for

        now = self.tether.now_ms()
        logs = log_source_for(self.tether.workspace, reader)
        self.search = await search_runs(reader, query, now_ms=now, limit=SEARCH_LIMIT, logs=logs)
        self._searched_text, self._searched_at_ms = self.filter_text, now
        self.tether.highlight_terms = query.text_terms
        return self.search.runs

    def search_crumb(self) -> Text:
        """How many runs match the filter, and what a full-text scan covered."""
        text = Text()
        found = self.search
        if found is not None:
            shown = len(found.runs)
            text.append(plural(found.total, "match", "matches") if shown == found.total
                        else f"newest {shown} of {found.total:,} matching")
        text.append("  filter: ", style="dim")
        text.append_text(literal(self.filter_text))
        if found is not None and found.scan is not None:
            from tui.format import ago

            text.append(f"  text searched {ago(self.tether.now_ms(), self._searched_at_ms)}",
                        style="dim")
            if not found.scan.complete:
                text.append(f" in the newest {found.scan.runs_searched:,} of "
                            f"{found.scan.runs_eligible:,}", style="yellow")
        return text

    async def on_filter_bar_applied(self, message: FilterBar.Applied) -> None:
        """Apply a query, or refuse it with its sentence (the filter in effect stays)."""
        message.prevent_default()  # Textual would call the base class's handler as well
        from store.read.run_query import parse_query

        try:
            parse_query(message.value, self.tether.now_ms())
        except InvalidInputError as error:
            self.app.notify(visible(str(error)), severity="error", markup=False, timeout=8)
            self.query_one(FilterBar).open(message.value)
            return
        self._searched_text = ""
        self.tether.highlight_terms = ()
        await super().on_filter_bar_applied(message)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "save_filter":
            return bool(self.filter_text)
        return super().check_action(action, parameters)

    async def action_saved_filters(self) -> None:
        """Pick a saved filter (enter applies it, d forgets it)."""
        from store.runs.saved_filters import saved_filters
        from tui.modals.filter_dialogs import SavedFiltersDialog

        reader = self.tether.reader
        filters = await saved_filters(reader) if reader is not None else []
        self.app.push_screen(SavedFiltersDialog(filters), self._picked)

    async def _picked(self, choice: tuple[str, str] | None) -> None:
        if choice is None:
            return
        verb, value = choice
        if verb == "apply":
            self.tether.filters[self.FILTER_KEY] = value
            self._searched_text = ""
            await self.tether.refresh_screen(self)
            return

        from store.runs.saved_filters import delete_filter

        async def forget() -> None:
            await delete_filter(await self.host.database(), value)
            self.app.notify(f"Forgot the filter {visible(value)}.", markup=False)

        await write_safely(self, forget)

    async def action_save_filter(self) -> None:
        """Save the filter in effect under a name."""
        from store.runs.saved_filters import save_filter, saved_filters
        from tui.modals.filter_dialogs import SaveFilterDialog

        reader = self.tether.reader
        taken = [f.name for f in await saved_filters(reader)] if reader is not None else []
        query = self.filter_text

        async def named(name: str | None) -> None:
            if name is None:
                return

            async def save() -> Any:
                saved = await save_filter(await self.host.database(create=True), name, query)
                self.app.notify(f"Saved the filter {visible(saved.name)}: F lists it.",
                                markup=False)

            await write_safely(self, save)

        self.app.push_screen(SaveFilterDialog(query, taken), named)

