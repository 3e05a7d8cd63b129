"""The Memory view (``3``): facts by namespace and notes, with editing and review.

Facts are grouped under one heading row per namespace; ``e`` edits the selected fact's value
(JSON, validated live) and TTL, ``n`` adds a fact, ``d`` deletes one after a confirmation that
names its namespace and key. Notes list pending proposals first; ``a`` accepts and ``r`` rejects
(with an optional recorded reason); ``enter`` opens the review screen, which shows a proposal
side by side with the notes it would supersede. The inspector on the right says why something is
remembered: who wrote it (run, node, time, author), what it replaces and what replaced it.

Every read and write goes through :class:`store.memory.memory_store.MemoryStore` on the dashboard's
writable
connection (:mod:`tui.run_control`): the same methods as ``tether memory`` / ``tether notes``.
Keys that do not apply to the selected row are hidden from the footer and do nothing.
"""

from __future__ import annotations

from typing import ClassVar

from tui.actions.fact_actions import FactActionsScreen
from tui.actions.note_actions import NoteActionsScreen


class MemoryScreen(NoteActionsScreen, FactActionsScreen):
    """The Memory view: facts and notes lists on the left, an inspector on the right."""

    MODE: ClassVar[str] = "memory"
    FILTER_KEY: ClassVar[str] = "memory"
    HELP_TITLE: ClassVar[str] = "Memory"
    HELP_TEXT: ClassVar[str] = (
        "Facts (top) are grouped by namespace; notes (bottom) list pending proposals first. "
        "tab moves between the lists. Edits go through the same memory store as "
        "`tether memory` and `tether notes`."
    )
    DEFAULT_CSS = """
    MemoryScreen #memory-body { height: 1fr; }
    MemoryScreen #memory-lists { width: 2fr; }
    MemoryScreen #memory-lists KeyedTable { height: 1fr; border: round $panel-lighten-2; }
    MemoryScreen #memory-lists KeyedTable:focus-within { border: round $accent; }
    MemoryScreen #memory-detail {
        width: 1fr; border: round $panel-lighten-2; padding: 0 1;
    }
    MemoryScreen #memory-body.-stacked { layout: vertical; }
    MemoryScreen #memory-body.-stacked #memory-lists { width: 100%; height: 2fr; }
    MemoryScreen #memory-body.-stacked #memory-detail { width: 100%; height: 1fr; }
    MemoryScreen #memory-search-banner { display: none; height: 1; padding: 0 1;
        background: $boost; }
    MemoryScreen #memory-search-banner.-visible { display: block; }
    """

    # The fact keys come first in the footer and in ? help (bindings merge base class first).
    KEY_NOTES: ClassVar[dict[str, str]] = {
        **FactActionsScreen.KEY_NOTES, **NoteActionsScreen.KEY_NOTES,
    }
    """When each key applies (the ? help lists every key with this note)."""
