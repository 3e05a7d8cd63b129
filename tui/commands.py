"""Command palette (ctrl+p) entries: jump to a run by id or workflow."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.app_api import DashboardApp, dashboard


class RunsProvider(Provider):
    """Open any run the dashboard has listed, by id, workflow or status."""

    @property
    def _tether(self) -> DashboardApp:
        return dashboard(self.app)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        app = self._tether
        for run in list(app.known_runs.values())[:500]:
            label = f"open run {run.run_id} · {run.workflow} · {run.status}"
            score = matcher.match(label)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(label),
                    partial(app.open_run, run.run_id),
                    help="Show the run's nodes and inspector",
                )

    async def discover(self) -> Hits:
        app = self._tether
        for run in list(app.known_runs.values())[:10]:
            yield DiscoveryHit(
                f"open run {run.run_id} · {run.workflow} · {run.status}",
                partial(app.open_run, run.run_id),
                help="Show the run's nodes and inspector",
            )
