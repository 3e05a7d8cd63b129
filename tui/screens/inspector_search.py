"""Finding words in the run view's inspector: the words of the Runs view's full-text search
(``text ~ …``) and of ``/`` on the Log tab are highlighted in the prompt, memory block, output
and log, and ``n`` / ``N`` jump to the next and previous match in the tab shown.

A match is found on the lines as drawn (long lines wrapped at the pane's width), so the jump
lands on the line that holds it; the log keeps following its end until a jump moves it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.highlighter import Highlighter
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Static, TabbedContent, Tabs

from tui.format import literal
from tui.screens.run_timeline import TimelineTab
from tui.widgets.filter_bar import FilterBar
from tui.widgets.log_view import FollowLog

MATCH_STYLE = "bold black on yellow"
TEXT_TABS = {"tab-prompt": "#prompt-text", "tab-memory": "#memory-text",
             "tab-output": "#output-text"}


def highlight(text: Text, terms: tuple[str, ...]) -> Text:
    """``text`` with every occurrence of ``terms`` marked (case-insensitive)."""
    if terms:
        text.highlight_words([t for t in terms if t], MATCH_STYLE, case_sensitive=False)
    return text


def matching_lines(lines: list[str], terms: tuple[str, ...]) -> list[int]:
    """The indexes of the lines that hold one of ``terms`` (case-insensitive)."""
    wanted = [t.lower() for t in terms if t]
    return [i for i, line in enumerate(lines) if any(t in line.lower() for t in wanted)]


def next_match(matches: list[int], current: int, step: int) -> int | None:
    """The match after (``step`` 1) or before (-1) line ``current``, wrapping around."""
    if not matches:
        return None
    if step > 0:
        return next((m for m in matches if m > current), matches[0])
    return next((m for m in reversed(matches) if m < current), matches[-1])


class TermHighlighter(Highlighter):
    """Marks the search terms in each log line."""

    def __init__(self, terms: tuple[str, ...]) -> None:
        self.terms = terms

    def highlight(self, text: Text) -> None:
        highlight(text, self.terms)


class InspectorSearch(TimelineTab):
    """Highlights and ``n``/``N`` in the inspector (the base of :class:`RunDetailScreen`)."""

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("n", "next_match(1)", "Next match"),
        Binding("N", "next_match(-1)", "Previous match"),
    ]
    KEY_NOTES: ClassVar[dict[str, str]] = {
        "next_match": "when words are highlighted (a full-text search, or / on the Log tab)",
    }

    search_terms: tuple[str, ...] = ()
    _log_term = ""
    _filter_for_log = False
    _at_line: dict[str, int] = {}
    shown_texts: dict[str, Text] = {}
    """What each text tab shows now (by tab id), to find its matches."""

    def on_mount(self) -> None:
        # Textual calls each base class's on_mount too (most derived first): no super().
        self.search_terms = tuple(self.tether.highlight_terms)
        self._at_line = {}
        # [ and ] switch tabs: the tab strips take no focus, so Tab goes from the graph (or
        # the table, or the timeline) straight to the pane on screen.
        for strip in self.query(Tabs):
            strip.can_focus = False
        if self.terms:
            self.apply_terms()

    @property
    def terms(self) -> tuple[str, ...]:
        """Every word highlighted now."""
        return tuple(dict.fromkeys((*self.search_terms, *((self._log_term,)
                                                           if self._log_term else ()))))

    def marked(self, value: object, style: str = "") -> Text:
        """Stored text shown literally, with the terms marked."""
        return highlight(literal(value, style), self.terms)

    def show_text(self, tab: str, text: Text) -> None:
        """Put ``text`` (terms marked) in a text tab and remember it for ``n``/``N``."""
        highlight(text, self.terms)
        self.shown_texts = {**self.shown_texts, tab: text}
        self._at_line.pop(tab, None)
        self.query_one(TEXT_TABS[tab], Static).update(text)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_match":
            return bool(self.terms)
        return super().check_action(action, parameters)

    def _inspector_tab(self) -> str:
        try:
            return str(self.query_one("#inspector", TabbedContent).active)
        except NoMatches:
            return ""

    def action_open_filter(self) -> None:
        """On the Log tab, ``/`` searches the log; elsewhere it filters the nodes."""
        self._filter_for_log = self._inspector_tab() == "tab-log"
        bar = self.query_one(FilterBar)
        if self._filter_for_log:
            bar.placeholder = "search the log (enter to search, empty to clear, esc to close)"
            bar.open(self._log_term)
            return
        bar.placeholder = "filter (enter to apply, empty to clear, esc to close)"
        super().action_open_filter()

    async def on_filter_bar_applied(self, message: FilterBar.Applied) -> None:
        message.prevent_default()  # Textual would call the base class's handler as well
        if not self._filter_for_log:
            await super().on_filter_bar_applied(message)
            return
        message.stop()
        self._log_term = message.value
        self.apply_terms()
        if self._log_term:
            self.action_next_match(1)
        self.refresh_bindings()

    def apply_terms(self) -> None:
        """Mark the terms in the log (the text tabs are marked as they are drawn)."""
        log = self.query_one("#node-log", FollowLog)
        log.highlight = bool(self.terms)
        log.highlighter = TermHighlighter(self.terms)
        log.redraw_lines()
        for tab, text in self.shown_texts.items():
            self.show_text(tab, text.copy())

    def action_next_match(self, step: int) -> None:
        """Scroll the tab shown to the next (or previous) line holding a highlighted word."""
        tab = self._inspector_tab()
        if tab == "tab-log":
            log = self.query_one("#node-log", FollowLog)
            current = self._at_line.get(tab, int(log.scroll_y) - 1)
            at = next_match(matching_lines(list(log.lines), self.terms), current, step)
            if at is None:
                self.app.notify("No highlighted word in the log.", timeout=3)
                return
            self._at_line[tab] = at
            log.scroll_to(y=max(0, at - 2), animate=False)
            return
        widget_id = TEXT_TABS.get(tab)
        text = self.shown_texts.get(tab)
        if widget_id is None or text is None:
            return
        static = self.query_one(widget_id, Static)
        box = static.parent
        width = max(10, static.content_region.width or self.size.width - 4)
        lines = [line.plain for line in text.wrap(self.app.console, width)]
        at = next_match(matching_lines(lines, self.terms), self._at_line.get(tab, -1), step)
        if at is None:
            self.app.notify("No highlighted word in this tab.", timeout=3)
            return
        self._at_line[tab] = at
        if isinstance(box, VerticalScroll):
            box.scroll_to(y=max(0, at - 2), animate=False)
