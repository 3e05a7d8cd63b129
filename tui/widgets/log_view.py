"""A log viewer that follows the end until the user scrolls up, then counts new lines."""

from __future__ import annotations

from collections.abc import Iterable

from textual.reactive import reactive
from textual.widgets import Log

from tui.format import visible


class FollowLog(Log):
    """Shows lines literally (control characters made visible) and follows the end.

    When the user scrolls away from the bottom, following stops and :attr:`pending` counts the
    lines that arrived since; scrolling back to the bottom (or ``end``) resumes following.
    Following is decided by the last scroll, not by where the view sits now: a view made
    shorter (a smaller terminal) keeps its scroll offset, which then lies above the new bottom,
    and it must still follow the end.
    """

    pending: reactive[int] = reactive(0)

    def __init__(self, *, max_lines: int = 5000, **kwargs: object) -> None:
        super().__init__(max_lines=max_lines, auto_scroll=False, **kwargs)  # type: ignore[arg-type]
        self._following = True

    @property
    def following(self) -> bool:
        """True while the view follows the end: its last scroll left it at (or within one
        line of) the bottom."""
        return self._following

    def _at_bottom(self) -> bool:
        return self.scroll_y >= self.max_scroll_y - 1

    def append(self, lines: Iterable[str]) -> None:
        """Add lines; scroll to them only when following."""
        clean = [visible(line, keep_newlines=False) for line in lines]
        if not clean:
            return
        follow = self.following
        self.write_lines(clean, scroll_end=False)
        if follow:
            self.scroll_end(animate=False, immediate=True)
            self.pending = 0
        else:
            self.pending += len(clean)

    def redraw_lines(self) -> None:
        """Draw every line again (after the highlighter changed)."""
        self._render_line_cache.clear()
        self.refresh()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._following = self._at_bottom()
        if self._following:
            self.pending = 0

    def on_resize(self) -> None:
        # A shorter view keeps its scroll offset (no scroll happens): bring the end back.
        if self._following and not self._at_bottom():
            self.scroll_end(animate=False, immediate=True)
