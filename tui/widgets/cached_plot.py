"""A plotext plot (textual-plotext) that redraws only when its data, size or theme changed.

Building a plotext figure and parsing its ANSI output costs ~25 ms; without the cache every
repaint of the region (switching back to a view, a dialog closing) would pay it again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import plotext._utility as _plotext_utility
from textual.app import RenderResult
from textual_plotext import PlotextPlot


def _stable_no_duplicates(data: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(data))


# plotext 5.x de-duplicates plot points through a set, so the drawing order (and the picture)
# depends on the process's hash seed. An order-keeping de-duplication draws the same picture
# every time, which keeps the dashboard's SVG snapshots stable.
_plotext_utility.no_duplicates = _stable_no_duplicates


class CachedPlot(PlotextPlot):
    """A PlotextPlot that keeps its last rendering while data, size and theme stay put."""

    version = 0
    """Bumped by whoever changes the plotted data."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cached: tuple[tuple[object, ...], RenderResult] | None = None

    def render(self) -> RenderResult:
        key = (self.size, self.version, self.app.theme, self.theme)
        if self._cached is None or self._cached[0] != key:
            self._cached = (key, super().render())
        return self._cached[1]
