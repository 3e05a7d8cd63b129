"""A fork chain in words, for ``tether runs --forks`` and the dashboard's chain view: each
run's place in the tree, the node it was forked from and its edit kind (pure)."""

from __future__ import annotations

from typing import Any

from engine.fork import edit_words
from store.read.fork_chain import ChainLink, ForkChain


def tree_prefix(link: ChainLink) -> str:
    """The tree glyphs before a run (nothing for the first run of the family)."""
    if link.depth == 0:
        return ""
    return "   " * (link.depth - 1) + ("└─ " if link.last else "├─ ")


def fork_words(link: ChainLink) -> str:
    """Where a run comes from: ``from NODE · EDIT · N carried`` (``first run`` for the root)."""
    run = link.run
    fork = run.fork or {}
    if run.forked_from is None:
        return "first run"
    if link.depth == 0:  # its origin was deleted: the chain starts here
        return f"forked from {run.forked_from} (deleted) from {run.fork_node}"
    carried = len(fork.get("carried") or [])
    return f"from {run.fork_node} · {edit_words(fork)} · {carried} carried"


def chain_json(chain: ForkChain, now_ms: int) -> dict[str, Any]:
    """The chain as ``tether runs --forks RUN --format json`` prints it."""
    return {
        "run": chain.asked,
        "cut": chain.cut,
        "chain": [{
            "run_id": link.run.run_id,
            "depth": link.depth,
            "workflow": link.run.workflow,
            "status": link.run.display_status(now_ms),
            "forked_from": link.run.forked_from,
            "fork_node": link.run.fork_node,
            "edit": edit_words(link.run.fork or {}) if link.run.forked_from else None,
            "carried": len((link.run.fork or {}).get("carried") or []),
        } for link in chain.links],
    }
