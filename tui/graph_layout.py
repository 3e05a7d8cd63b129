"""A run's nodes as a dependency graph: grouping and layering (pure, tested directly).

A run stores one row per node iteration. The graph shows one box per *task*:

- the items of a fan-out (``review[api.py]``, ``review[db.py]`` …) collapse into one box
  ``review[…]`` with how many are done of how many;
- the iterations of a loop task collapse into one box showing its latest iteration;
- boxes are placed in columns by dependency depth (a box sits one column right of its deepest
  dependency), in the order the run started them inside a column.

Tokens (and cost, when the usage rows carry one) are summed over the box's node iterations.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store.model.run_records import NodeRecord
    from store.read.dashboard_rows import NodeUsage

RUNNING_STATES = ("running", "retrying")
DONE_STATES = ("finished", "skipped")


def group_key(node_id: str) -> str:
    """The box a node belongs to: ``review[api.py]`` -> ``review[…]``; others are themselves."""
    if node_id.endswith("]") and "[" in node_id:
        return node_id[: node_id.index("[")] + "[…]"
    return node_id


def base_id(key: str) -> str:
    """The task id of a box (``review[…]`` -> ``review``)."""
    return key.removesuffix("[…]")


def combined_state(states: Sequence[str]) -> str:
    """One state for several node iterations: running beats failed beats waiting; all done is
    finished; an empty group is pending."""
    if not states:
        return "pending"
    for wanted in ("running", "retrying", "failed", "cancelled", "abandoned"):
        if wanted in states:
            return wanted
    if all(state in DONE_STATES for state in states):
        return "skipped" if all(state == "skipped" for state in states) else "finished"
    return "pending"


@dataclass(frozen=True)
class Member:
    """One node iteration inside a box: its row key, id, iteration and state."""

    key: str
    node_id: str
    iteration: int
    state: str
    tokens: int = 0
    cost: float | None = None
    attempts: int = 0
    cached: bool = False
    """Its output came from the task cache (no agent ran)."""
    warned: bool = False
    """An attempt recorded warnings (a memory tool call that did not run, ...)."""


@dataclass(frozen=True)
class GraphBox:
    """One task of the run as drawn in the graph."""

    key: str
    members: tuple[Member, ...]
    depends_on: tuple[str, ...]
    column: int = 0

    @property
    def state(self) -> str:
        """The box's state: the latest iteration's for a loop, the combination for a fan-out."""
        if self.is_loop:
            return self.members[-1].state
        return combined_state([m.state for m in self.members])

    @property
    def is_fan_out(self) -> bool:
        return self.key.endswith("[…]")

    @property
    def is_loop(self) -> bool:
        return not self.is_fan_out and any(m.iteration > 0 for m in self.members)

    @property
    def iteration(self) -> int:
        """The latest loop iteration (0 when not a loop)."""
        return max((m.iteration for m in self.members), default=0)

    @property
    def done(self) -> int:
        return sum(1 for m in self.members if m.state in DONE_STATES)

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.members)

    @property
    def cost(self) -> float | None:
        """Summed cost, or None when no member's usage carries a cost."""
        costs = [m.cost for m in self.members if m.cost is not None]
        return sum(costs) if costs else None

    @property
    def attempts(self) -> int:
        return sum(m.attempts for m in self.members)

    @property
    def warnings(self) -> int:
        """How many of its node iterations recorded warnings."""
        return sum(1 for m in self.members if m.warned)

    @property
    def focus_member(self) -> Member:
        """The node iteration the inspector shows for this box: the latest loop iteration, a
        running fan-out item, else the first item."""
        if self.is_loop:
            return self.members[-1]
        for member in self.members:
            if member.state in RUNNING_STATES:
                return member
        return self.members[0]


@dataclass
class RunGraph:
    """Boxes in columns (each column top to bottom), and where each node row lives."""

    columns: list[list[GraphBox]] = field(default_factory=list)

    def position_of(self, row_key: str) -> tuple[int, int] | None:
        """(column, row) of the box holding the node iteration ``row_key``."""
        for x, column in enumerate(self.columns):
            for y, box in enumerate(column):
                if any(m.key == row_key for m in box.members):
                    return x, y
        return None


def build_graph(
    nodes: Iterable[NodeRecord],
    usage: Mapping[str, NodeUsage] | None = None,
    warned: Collection[str] = (),
) -> RunGraph:
    """Group ``nodes`` (in start order) into boxes and place them in columns. ``usage`` maps a
    node iteration's key to what its calls used (tokens, and cost when known); ``warned``
    holds the keys of node iterations whose attempts recorded warnings."""
    usage = usage or {}
    order: list[str] = []
    members: dict[str, list[Member]] = {}
    deps: dict[str, list[str]] = {}
    for node in nodes:
        key = group_key(node.node_id)
        if key not in members:
            order.append(key)
            members[key] = []
            deps[key] = []
        used = usage.get(node.key)
        members[key].append(Member(
            node.key, node.node_id, node.iteration, node.state,
            used.tokens.total if used else 0,
            used.cost.usd if used else None,
            int(node.attempts or 0),
            bool(node.cached),
            node.key in warned,
        ))
        for dep in node.depends_on:
            if dep not in deps[key]:
                deps[key].append(dep)
    by_base = {base_id(key): key for key in order}
    resolved: dict[str, tuple[str, ...]] = {}
    for key in order:
        targets: list[str] = []
        for dep in deps[key]:
            target = dep if dep in members else by_base.get(base_id(group_key(dep)))
            if target is not None and target != key and target not in targets:
                targets.append(target)
        resolved[key] = tuple(targets)

    column_of: dict[str, int] = {}

    def column(key: str, path: frozenset[str]) -> int:
        if key in column_of:
            return column_of[key]
        if key in path:  # a cycle cannot be stored, but never loop forever on bad data
            return 0
        result = 1 + max((column(dep, path | {key}) for dep in resolved[key]), default=-1)
        column_of[key] = result
        return result

    graph = RunGraph()
    for key in order:
        x = column(key, frozenset())
        while len(graph.columns) <= x:
            graph.columns.append([])
        ordered = tuple(sorted(members[key], key=lambda m: (m.iteration, m.node_id)))
        graph.columns[x].append(GraphBox(key, ordered, resolved[key], x))
    return graph


def move(graph: RunGraph, position: tuple[int, int], dx: int, dy: int) -> tuple[int, int]:
    """The cursor after an arrow key: along a column (up/down) or to the nearest row of the
    next column (left/right); stays put at the edges."""
    x, y = position
    if not graph.columns:
        return (0, 0)
    x = min(max(x, 0), len(graph.columns) - 1)
    if dx:
        nx = min(max(x + dx, 0), len(graph.columns) - 1)
        return nx, min(y, len(graph.columns[nx]) - 1)
    ny = min(max(y + dy, 0), len(graph.columns[x]) - 1)
    return x, ny
