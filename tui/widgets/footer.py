"""The footer of every dashboard screen: Textual's, without the memory it leaks.

Textual's Footer (8.2) rebuilds its keys whenever the keys that apply change (a run starting
or ending changes what ``c``, ``R`` and ``d`` do). Two things kept what each rebuild removed:

- each new key is bound to the footer's ``compact`` value by a watcher kept in a list on the
  footer, pruned only when ``compact`` changes, which in the dashboard it never does: every
  rebuild kept the ten-odd keys it removed, with their styles and caches (0.1-0.2 MB per run
  in a long session). This footer drops the watchers of removed keys after each rebuild.
- ``StylesCache.get_inner_outer`` (textual/_styles_cache.py) is an ``lru_cache(1024)`` on a
  method, so it keys by the styles cache of each widget it renders: the styles caches of the
  last thousand-odd widgets removed stay alive, each with the lines it rendered (an object
  census over 200 runs of churn: 1000 styles caches no widget owns, all footer keys', and
  the two styles each entry holds). This footer empties that cache after each rebuild (every
  widget's next render adds its entry back: two Style objects).
"""

from __future__ import annotations

from typing import Any

from textual._styles_cache import StylesCache
from textual.widgets import Footer


def live_watchers(watchers: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """The (node, callback) watchers whose node is still in use (not closing or closed)."""
    return [(node, callback) for node, callback in watchers
            if not (getattr(node, "_closing", False) or getattr(node, "_closed", False))]


class BoundedFooter(Footer):
    """A Footer whose rebuilds leave nothing behind."""

    async def recompose(self) -> None:
        await super().recompose()
        # Textual keeps a reactive's watchers in the attribute "__watchers" of the watched
        # object (textual/reactive.py, _watch); the name is not mangled there (setattr).
        watchers: dict[str, list[tuple[Any, Any]]] = getattr(self, "__watchers", {})
        for name, found in watchers.items():
            watchers[name] = live_watchers(found)
        # The removed keys' styles caches are keys of this cache: let them go.
        StylesCache.get_inner_outer.cache_clear()
