"""Handoffs carry progress: a successor generation never runs again what an earlier generation
of its chain finished with the same inputs.

Every finished node records its **input key**: a digest of its agent, its task prompt (as the
task rendered it: the run input, its upstream outputs, its item and iteration, the carried
state it read) and its output schema. When a run that continues a handoff chain (generation
1 or later) reaches a node, the nearest earlier generation that finished the same node and
iteration is looked up; when that node's input key equals the one the task renders now, the
node is **carried**: recorded finished with that output and ``carried_from`` (the run whose
attempt produced it), with no attempt and no agent call. A prompt that reads
``ctx.continuation`` (the distilled state) changes with every generation, so such a task runs
again on its own; ``carry=False`` on a task makes it run in every generation regardless.

:func:`carry_candidates` reads the chain once when the successor starts (at most one run per
generation); :func:`input_key` is pure. A fork (:mod:`engine.fork`) carries the node
iterations its ``fork_json`` lists from the run it was forked from *as recorded*
(:func:`fork_candidates`): what is upstream of the forked node is never run again, whatever
its prompt would render now.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from store.model.run_records import RunRecord
from store.runs.run_store import RunStore


def input_key(agent: str, task_prompt: str, schema: dict[str, Any] | None) -> str:
    """What a node's output is made from, as a digest (equal inputs, equal keys)."""
    material = json.dumps([agent, task_prompt, schema], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Finished:
    """A node an earlier generation finished: its output, what it was made from, and the run
    whose attempt made it."""

    output: Any
    input_key: str
    made_in: str
    as_recorded: bool = False
    """Carried whatever its inputs are now (a fork's upstream), not only with equal keys."""


async def carry_candidates(store: RunStore, run: RunRecord) -> dict[tuple[str, int], Finished]:
    """The finished nodes of ``run``'s earlier generations, nearest generation first (a node
    carried into a generation keeps the run that made it)."""
    found: dict[tuple[str, int], Finished] = {}
    parent_id, seen = run.parent_run_id, 0
    while parent_id is not None and seen < max(run.generation, 1):
        parent = await store.get_run(parent_id)
        for node in await store.list_nodes(parent_id):
            key = (node.node_id, node.iteration)
            if node.state == "finished" and node.input_key and key not in found:
                found[key] = Finished(node.output, node.input_key, node.carried_from or parent_id)
        parent_id, seen = parent.parent_run_id, seen + 1
    return found


async def fork_candidates(store: RunStore, run: RunRecord) -> dict[tuple[str, int], Finished]:
    """The node iterations a fork carries over from the run it was forked from, as recorded
    (the list ``engine.fork`` wrote when the fork was made; each one finished there)."""
    fork = run.fork or {}
    if run.forked_from is None or run.generation:
        return {}
    wanted = {(str(k[0]), int(k[1])) for k in fork.get("carried") or [] if len(k) == 2}
    found: dict[tuple[str, int], Finished] = {}
    for node in await store.list_nodes(run.forked_from):
        key = (node.node_id, node.iteration)
        if key in wanted and node.state == "finished":
            made_in = node.carried_from or run.forked_from
            found[key] = Finished(node.output, node.input_key or "", made_in, as_recorded=True)
    return found
