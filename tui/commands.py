"""Command palette (ctrl+p) entries: jump to a run by id or workflow.

Run ids, workflow names and statuses come from the database, so they are shown literally:
Textual's own ``Matcher.highlight`` parses its argument as markup (``bad[/oops`` would crash the
palette, ``[@click=...]`` would act), and a control character could reach the terminal. Labels
are plain :class:`~textual.content.Content` with control characters made visible, and the
matched letters are styled by offset.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Matcher, Provider
from textual.content import Content

from tui.format import visible

if TYPE_CHECKING:
    from store.model.run_records import RunRecord
from tui.app_api import DashboardApp, dashboard


def run_label(run: RunRecord) -> str:
    """The palette text of a run, on one line, with control characters made visible."""
    return visible(f"open run {run.run_id} · {run.workflow} · {run.status}", keep_newlines=False)


def literal_highlight(matcher: Matcher, label: str) -> Content:
    """``label`` as plain content (never parsed as markup) with the matched letters styled."""
    content = Content(label)
    score, offsets = matcher.fuzzy_search.match(matcher.query, label)
    if not score:
        return content
    for offset in offsets:
        if not label[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content


class RunsProvider(Provider):
    """Open any run the dashboard has listed, by id, workflow or status."""

    @property
    def _tether(self) -> DashboardApp:
        return dashboard(self.app)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        app = self._tether
        for run in list(app.known_runs.values())[:500]:
            label = run_label(run)
            score = matcher.match(label)
            if score > 0:
                yield Hit(
                    score,
                    literal_highlight(matcher, label),
                    partial(app.open_run, run.run_id),
                    text=label,
                    help="Show the run's nodes and inspector",
                )

    async def discover(self) -> Hits:
        app = self._tether
        for run in list(app.known_runs.values())[:10]:
            label = run_label(run)
            yield DiscoveryHit(
                Content(label),
                partial(app.open_run, run.run_id),
                text=label,
                help="Show the run's nodes and inspector",
            )
