"""The Runs view's cluster line (pure): the executor's nodes as an orchestrator last saw them,
each with its host, address and resources in use of total; lost nodes marked. Every stored
string goes through :func:`tui.format.one_line` (never markup)."""

from __future__ import annotations

from rich.text import Text

from store.model.executor_records import ExecutorNodeRecord
from tui.format import one_line
from tui.plain import ago

RECENTLY_LOST_MS = 10 * 60_000
"""Lost nodes stay named this long; older ones are only counted."""
QUIET_AFTER_MS = 60_000
"""A snapshot older than this is from a time no run was using the cluster: said so."""
_SKIPPED = ("memory",)


def amount(value: float) -> str:
    """A resource amount as people write it: ``2``, ``0.5``."""
    return f"{value:g}"


def resources_text(node: ExecutorNodeRecord) -> str:
    """``CPU 1/2 claude 1/4``: in use of total, CPU and GPU first, then custom resources."""
    names = sorted(node.resources, key=lambda n: (n not in ("CPU", "GPU"), n))
    parts = []
    for name in names:
        if name in _SKIPPED:
            continue
        used = node.in_use(name)
        shown = "?" if used is None else amount(used)
        parts.append(f"{name} {shown}/{amount(node.resources[name])}")
    return " ".join(parts)


def cluster_text(nodes: list[ExecutorNodeRecord], now_ms: int) -> Text | None:
    """The line, or None when no executor node was ever seen."""
    if not nodes:
        return None
    text = Text("Ray cluster ", style="bold")
    alive = [n for n in nodes if n.alive]
    lost = [n for n in nodes if not n.alive]
    recent = [n for n in lost if now_ms - (n.lost_at_ms or n.updated_at_ms) <= RECENTLY_LOST_MS]
    for index, node in enumerate([*alive, *recent]):
        if index:
            text.append(" · ", style="dim")
        text.append_text(one_line(node.host, width=24))
        text.append(" ")
        text.append_text(one_line(node.address, "dim", width=40))
        if node.alive:
            text.append(f" {resources_text(node)}")
        else:
            text.append(f" LOST {ago(now_ms, node.lost_at_ms)}", style="bold yellow")
    if len(lost) > len(recent):
        text.append(f" (+{len(lost) - len(recent)} lost earlier)", style="dim")
    seen = max(n.updated_at_ms for n in nodes)
    quiet = now_ms - seen > QUIET_AFTER_MS
    text.append(
        f"  seen {ago(now_ms, seen)}{' (no run is using it now)' if quiet else ''}",
        style="dim",
    )
    return text
