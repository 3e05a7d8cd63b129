"""The status line (data freshness) and the pause banner every screen shows."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class StatusLine(Static):
    """One line at the bottom: workspace, how fresh the data is, event sequence, problems."""

    DEFAULT_CSS = """
    StatusLine { height: 1; background: $panel; color: $text-muted; padding: 0 1; }
    """

    def show(self, text: Text) -> None:
        """Replace the line (only when it changed, to avoid needless repaints)."""
        if str(self.render()) != text.plain:
            self.update(text)


class PauseBanner(Static):
    """Shown while live updates are paused; data keeps being collected underneath."""

    DEFAULT_CSS = """
    PauseBanner {
        display: none; height: 1; background: $warning; color: $background;
        text-style: bold; padding: 0 1;
    }
    PauseBanner.-visible { display: block; }
    """

    def set_paused(self, paused: bool, held_changes: int) -> None:
        """Show or hide the banner with the number of changes held back."""
        self.set_class(paused, "-visible")
        if paused:
            self.update(
                Text(
                    f"PAUSED — live updates held ({held_changes} new events collected); "
                    "press p to resume"
                )
            )
