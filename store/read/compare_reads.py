"""Two runs side by side (two runs of a workflow, two generations of a chain, a run and its
fork: any pair): their node iterations paired by key, each side's state, attempts, tokens,
cost and duration, and, for one pair, the texts to diff (the latest attempt's prompt as sent,
the memory block, the output). The same reads on both backends and for both the dashboard's
reader and a Database.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from store.errors import NotFoundError
from store.model.run_records import NodeRecord, RunRecord
from store.model.token_lanes import CostTotal, TokenUsage
from store.read import dashboard_sql
from store.read.dashboard_rows import NodeUsage
from store.read.run_search import Rows
from store.read.timeline_reads import TIMELINE_RUN

COMPARED_NODES = """
SELECT run_id, node_id, iteration, state, attempts, cached, depends_on_json,
       NULL AS output_json, NULL AS error, started_at_ms, finished_at_ms, updated_at_ms,
       carried_from
FROM nodes WHERE run_id = ?
ORDER BY started_at_ms IS NULL, started_at_ms, node_id, iteration
"""
NODE_OUTPUT = """
SELECT output_json, error FROM nodes WHERE run_id = ? AND node_id = ? AND iteration = ?
"""
LATEST_ATTEMPT = """
SELECT prompt, response_text FROM attempts WHERE run_id = ? AND node_id = ? AND iteration = ?
ORDER BY attempt DESC LIMIT 1
"""
MEMORY_TEXT = """
SELECT text, bytes_used, budget_bytes FROM memory_blocks
WHERE run_id = ? AND node_id = ? AND iteration = ?
"""


class Side(NamedTuple):
    """One run's node iteration in a comparison."""

    node: NodeRecord
    calls: int
    tokens: TokenUsage
    cost: CostTotal

    def duration_ms(self, now_ms: int) -> int | None:
        """How long it ran (None before it started)."""
        return self.node.elapsed_ms(now_ms)


class Pair(NamedTuple):
    """A node iteration of either run (None on the side that has no such node)."""

    key: str
    a: Side | None
    b: Side | None

    @property
    def carried(self) -> bool:
        """Whether both sides hold the same recorded output: one (or both) carried it over
        from the run whose attempt made it (a fork's upstream, a handoff's finished nodes)."""
        if self.a is None or self.b is None:
            return False
        a, b = self.a.node, self.b.node
        if a.carried_from is None and b.carried_from is None:
            return False
        return (a.carried_from or a.run_id) == (b.carried_from or b.run_id)

    @property
    def differs(self) -> bool:
        """Whether the two sides differ in state, attempts or tokens (or one is missing); a
        carried pair never does (it is one recorded output)."""
        if self.a is None or self.b is None:
            return True
        if self.carried:
            return False
        return (self.a.node.state, self.a.node.attempts, self.a.tokens) != (
            self.b.node.state, self.b.node.attempts, self.b.tokens)


class Comparison(NamedTuple):
    """Two runs and their node iterations paired (A's order, then what only B has)."""

    a: RunRecord
    b: RunRecord
    pairs: list[Pair]

    @property
    def relation(self) -> str:
        """How the two runs are related, in words."""
        if self.b.parent_run_id == self.a.run_id:
            return f"{self.b.run_id} continues {self.a.run_id} (generation {self.b.generation})"
        if self.a.parent_run_id == self.b.run_id:
            return f"{self.a.run_id} continues {self.b.run_id} (generation {self.a.generation})"
        for one, other in ((self.b, self.a), (self.a, self.b)):
            if one.forked_from == other.run_id:
                return f"{one.run_id} is a fork of {other.run_id} from node {one.fork_node}"
        if self.a.workflow == self.b.workflow:
            return f"two runs of {self.a.workflow}"
        return f"runs of {self.a.workflow} and {self.b.workflow}"


class NodeTexts(NamedTuple):
    """What one side of a pair saw and said: the latest attempt's prompt and raw answer, the
    memory block injected, the output (JSON as stored) and the error."""

    prompt: str | None
    memory: str | None
    output: str | None
    answer: str | None
    error: str | None


def pair_nodes(
    a: Sequence[Side], b: Sequence[Side]
) -> list[Pair]:
    """Pair node iterations by key: A's in order, each with B's of the same key, then B's
    that A does not have (pure)."""
    theirs = {side.node.key: side for side in b}
    pairs = [Pair(side.node.key, side, theirs.pop(side.node.key, None)) for side in a]
    pairs.extend(Pair(key, None, side) for key, side in theirs.items())
    return pairs


def latest_iteration(comparison: Comparison, node_id: str) -> int:
    """The latest iteration of ``node_id`` in either run (0 when neither has it), as ``tether
    node`` shows a loop node named without one."""
    return max((side.node.iteration for pair in comparison.pairs for side in (pair.a, pair.b)
                if side is not None and side.node.node_id == node_id), default=0)


async def _sides(rows: Rows, run_id: str) -> list[Side]:
    nodes = [NodeRecord.from_row(r) for r in await rows.fetch_all(COMPARED_NODES, (run_id,))]
    usage = {u.key: u for u in (NodeUsage.from_row(r) for r in
                                await rows.fetch_all(dashboard_sql.NODE_USAGE_OF_RUN, (run_id,)))}
    out = []
    for node in nodes:
        found = usage.get(node.key)
        out.append(Side(node, found.calls if found else 0,
                        found.tokens if found else TokenUsage(),
                        found.cost if found else CostTotal()))
    return out


async def _run(rows: Rows, run_id: str) -> RunRecord:
    found = await rows.fetch_all(TIMELINE_RUN, (run_id,))
    if not found:
        raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
    return RunRecord.from_row(found[0])


async def compare_runs(rows: Rows, a_id: str, b_id: str) -> Comparison:
    """Read two runs and pair their node iterations. Raises NotFoundError."""
    a, b = await _run(rows, a_id), await _run(rows, b_id)
    return Comparison(a, b, pair_nodes(await _sides(rows, a_id), await _sides(rows, b_id)))


async def node_texts(rows: Rows, run_id: str, node_key: str) -> NodeTexts:
    """The texts of one node iteration of a run (all None when it has no such node)."""
    node_id, _, iteration = node_key.rpartition("#")
    key = (run_id, node_id, int(iteration or 0))
    outputs = await rows.fetch_all(NODE_OUTPUT, key)
    attempts = await rows.fetch_all(LATEST_ATTEMPT, key)
    blocks = await rows.fetch_all(MEMORY_TEXT, key)
    output = outputs[0][0] if outputs else None
    error = outputs[0][1] if outputs else None
    prompt = attempts[0][0] if attempts else None
    answer = attempts[0][1] if attempts else None
    memory = blocks[0][0] if blocks else None
    return NodeTexts(prompt, memory, output, answer, error)
