"""The fork chain of a run: the run it was forked from, back to the first run of the family
(the one that is no fork), and every fork of those, down to forks of forks, each with the node
it was forked from and its edit. The dashboard's chain view (``o``) and ``tether runs --forks``
read it the same on both backends, through ``runs_forked_from_idx``.

:func:`chain_rows` orders a family as a tree (pure): the first run, then each fork under the
run it was forked from, oldest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from store.errors import NotFoundError
from store.model.run_records import RunRecord
from store.read.dashboard_sql import RUN_COLUMNS
from store.read.run_search import Rows

MAX_FAMILY = 500
"""The most runs a chain shows (a family larger than this is said to be cut)."""

_COLUMNS = f"{RUN_COLUMNS}, fork_json"
CHAIN_RUN = f"SELECT {_COLUMNS} FROM runs WHERE run_id = ?"
FORKS_OF = (f"SELECT {_COLUMNS} FROM runs WHERE forked_from = ? "
            "ORDER BY created_at_ms, run_id LIMIT ?")


class ChainLink(NamedTuple):
    """One run of a fork chain: how deep it is (0: the first run) and the run itself."""

    depth: int
    run: RunRecord
    last: bool
    """Whether it is the last fork of the run it was forked from (the tree's ``└``)."""


class ForkChain(NamedTuple):
    """A run's fork family as a tree, and whether it was cut at :data:`MAX_FAMILY` runs."""

    asked: str
    links: list[ChainLink]
    cut: bool


def chain_rows(runs: Sequence[RunRecord], root: str) -> list[ChainLink]:
    """The family as tree rows (pure): ``root``, then each run's forks under it, oldest
    first; a run whose origin is not in ``runs`` is left out."""
    children: dict[str, list[RunRecord]] = {}
    by_id = {r.run_id: r for r in runs}
    for run in sorted(runs, key=lambda r: (r.created_at_ms, r.run_id)):
        if run.forked_from is not None and run.run_id != root:
            children.setdefault(run.forked_from, []).append(run)
    if root not in by_id:
        return []
    links: list[ChainLink] = []
    todo: list[tuple[int, RunRecord, bool]] = [(0, by_id[root], True)]
    seen: set[str] = set()
    while todo:
        depth, run, last = todo.pop()
        if run.run_id in seen:  # a cycle cannot be written, but a tree is never drawn twice
            continue
        seen.add(run.run_id)
        links.append(ChainLink(depth, run, last))
        forks = children.get(run.run_id, [])
        todo.extend((depth + 1, fork, i == len(forks) - 1) for i, fork in
                    reversed(list(enumerate(forks))))
    return links


async def read_fork_chain(rows: Rows, run_id: str) -> ForkChain:
    """Read ``run_id``'s fork family (up to its first run, then every fork below it).

    Raises NotFoundError for a run the workspace does not have.
    """
    found = await rows.fetch_all(CHAIN_RUN, (run_id,))
    if not found:
        raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
    run = RunRecord.from_row(found[0])
    family = {run.run_id: run}
    while run.forked_from is not None and len(family) < MAX_FAMILY:
        above = await rows.fetch_all(CHAIN_RUN, (run.forked_from,))
        if not above or above[0][0] in family:
            break  # the origin was deleted: the chain starts at the oldest run still here
        run = RunRecord.from_row(above[0])
        family[run.run_id] = run
    root = run.run_id
    todo, read, cut = [root], set(), False
    while todo and not cut:
        parent = todo.pop()
        read.add(parent)
        found = await rows.fetch_all(FORKS_OF, (parent, MAX_FAMILY))
        for fork in (RunRecord.from_row(r) for r in found):
            # The runs on the way up are in the family already; their forks are read too.
            if fork.run_id not in family and len(family) >= MAX_FAMILY:
                cut = True
                break
            family[fork.run_id] = fork
            if fork.run_id not in read:
                todo.append(fork.run_id)
    return ForkChain(run_id, chain_rows(list(family.values()), root), cut)
