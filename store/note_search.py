"""Former home of the note-search policy, now :mod:`store.search_policy` (shared with recall).

Kept only because ``tui/cli/notes_commands.py`` still imports :func:`query_terms` from here;
remove once that import points at :mod:`store.search_policy`.
"""

from __future__ import annotations

from store.search_policy import query_terms

__all__ = ["query_terms"]
