"""The run query language compiled to SQL (pure): a parsed :class:`store.read.run_query.Query`
becomes one ``WHERE`` clause over ``runs`` with bound parameters, written once in SQLite's
spelling (PostgreSQL gets it through :mod:`store.db.dialect`; only a condition on a field of
the input carries PostgreSQL's own text, JSON being typed differently there).

Index plan (10 000 runs searched well within 200 ms, ``bench/bench_run_search.py``): the page
is read newest first through ``runs_created_idx`` (``runs_workflow_created_idx`` and
``runs_status_created_idx`` when the query pins a workflow or a status); ``agent`` and
``model`` are one subquery each through ``attempts_agent_idx``, ``attempts_model_idx`` and
``usage_hours_model_idx`` (never a lookup per run); errors are found through the partial
``attempts_failed_idx`` and ``nodes_failed_idx``, so only what failed is read. A full-text
condition becomes ``run_id IN (the runs the scan found)``: :mod:`store.read.run_search` fills
that list from a bounded scan and says what it covered.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from store.db.dialect import Statement
from store.model.run_records import STALE_AFTER_MS
from store.model.token_lanes import LANE_COLUMNS
from store.read.run_query import All, Condition, Either, Node, Not, Query, Word

_TOKENS = "(" + " + ".join(f"runs.{c}" for c in LANE_COLUMNS) + ")"
_COLUMNS = {
    "run": "runs.run_id",
    "workflow": "runs.workflow",
    "parent": "runs.parent_run_id",
    "forked": "runs.forked_from",
    "gen": "runs.generation",
    "created": "runs.created_at_ms",
    "started": "runs.started_at_ms",
    "finished": "runs.finished_at_ms",
    "cost": "runs.cost_usd",
    "tokens": _TOKENS,
    "nodes": "runs.nodes_total",
    "age": "(:now - runs.created_at_ms)",
    "duration": (
        "(coalesce(runs.finished_at_ms, CASE WHEN runs.status = 'running' THEN :now "
        "ELSE runs.updated_at_ms END) - coalesce(runs.started_at_ms, runs.created_at_ms))"
    ),
}
# Where each multi-valued field's values are found (a run matches when one of them does).
_MULTI_SOURCES = {
    "agent": ("SELECT run_id FROM attempts WHERE {test}",),
    "model": (
        "SELECT run_id FROM attempts WHERE {test}",
        "SELECT run_id FROM usage_hours WHERE {test}",
    ),
}
_MULTI_COLUMN = {"agent": "agent", "model": "model"}
_STALE = (
    "(runs.status = 'running' AND coalesce(runs.heartbeat_at_ms, runs.started_at_ms, "
    "runs.created_at_ms) < :stale_before)"
)
ERROR_RUNS = (
    "SELECT run_id FROM nodes INDEXED BY nodes_failed_idx"
    " WHERE error IS NOT NULL AND instr(lower(error), :needle) > 0"
    " UNION SELECT run_id FROM attempts INDEXED BY attempts_failed_idx"
    " WHERE error IS NOT NULL AND instr(lower(error), :needle) > 0"
)
"""The runs a node or attempt of which failed with ``:needle`` in its error: read once per
search (through the partial indexes: only what failed), not once for the page and again for
the count, and handed to both as a JSON list of ids."""


class Sql(NamedTuple):
    """A piece of SQL in SQLite's spelling, and PostgreSQL's where it really differs."""

    sqlite: str
    postgres: str | None = None

    def wrap(self, before: str, after: str = "") -> Sql:
        """The piece between ``before`` and ``after``."""
        postgres = None if self.postgres is None else before + self.postgres + after
        return Sql(before + self.sqlite + after, postgres)


def joined(separator: str, pieces: list[Sql]) -> Sql:
    """``separator`` between the pieces (PostgreSQL's text kept when any has one)."""
    sqlite = separator.join(piece.sqlite for piece in pieces)
    if all(piece.postgres is None for piece in pieces):
        return Sql(sqlite)
    return Sql(sqlite, separator.join(piece.postgres or piece.sqlite for piece in pieces))


class FullText(NamedTuple):
    """A full-text condition to scan for: the parameter the matching run ids fill, where to
    look (text, prompt, output or log) and the words, lowered."""

    param: str
    field: str
    needle: str


class ErrorText(NamedTuple):
    """An error condition: the parameter the ids of runs whose nodes or attempts failed with
    ``needle`` fill (:data:`ERROR_RUNS`, read before the page and the count)."""

    param: str
    needle: str


class Compiled(NamedTuple):
    """A query as a ``WHERE`` clause over ``runs``, its parameters, and its full-text
    conditions (each a JSON list of run ids in ``params``, filled by the scan) and error
    conditions (likewise, filled by :data:`ERROR_RUNS`)."""

    where: Sql
    params: dict[str, Any]
    fulltext: tuple[FullText, ...]
    errors: tuple[ErrorText, ...] = ()

    def statement(self, head: str, tail: str = "") -> Statement:
        """``head WHERE … tail`` as one statement (with PostgreSQL's text where needed)."""
        sqlite = f"{head} WHERE {self.where.sqlite} {tail}"
        if self.where.postgres is None:
            return Statement(sqlite)
        return Statement(sqlite, postgres=f"{head} WHERE {self.where.postgres} {tail}")


class _Compiler:
    def __init__(self, now_ms: int) -> None:
        self.params: dict[str, Any] = {"now": now_ms, "stale_before": now_ms - STALE_AFTER_MS}
        self.fulltext: list[FullText] = []
        self.errors: list[ErrorText] = []

    def bind(self, value: Any) -> str:
        name = f"p{len(self.params)}"
        self.params[name] = value
        return f":{name}"

    def node(self, node: Node) -> Sql:
        if isinstance(node, Word):
            return self.word(node.text)
        if isinstance(node, Not):
            return self.node(node.inner).wrap("NOT (", ")")
        if isinstance(node, All):
            return joined(" AND ", [self.node(p).wrap("(", ")") for p in node.parts])
        if isinstance(node, Either):
            return joined(" OR ", [self.node(p).wrap("(", ")") for p in node.parts])
        return self.condition(node)

    def word(self, text: str) -> Sql:
        p = self.bind(text.lower())
        stale = f" OR {_STALE}" if text.lower() == "stale" else ""
        return Sql(
            f"(instr(lower(runs.run_id), {p}) > 0 OR instr(lower(runs.workflow), {p}) > 0 "
            f"OR runs.status = {p}{stale})"
        )

    def condition(self, c: Condition) -> Sql:
        if c.field == "status":
            return self.status(c)
        if c.field in _MULTI_SOURCES:
            return self.multi(c)
        if c.field == "input":
            return self.json_field(c)
        if c.field == "error":
            needle = str(c.values[0]).lower()
            param = f"er{len(self.errors)}"
            self.params[param] = "[]"
            self.errors.append(ErrorText(param, needle))
            clause = Sql(f"(instr(lower(runs.error), {self.bind(needle)}) > 0 OR runs.run_id IN "
                         f"(SELECT value FROM json_each(:{param})))")
            return clause if c.op == "~" else clause.wrap("NOT ")
        if c.field in ("text", "prompt", "output", "log"):
            param = f"ft{len(self.fulltext)}"
            self.params[param] = "[]"
            self.fulltext.append(FullText(param, c.field, str(c.values[0]).lower()))
            test = f"runs.run_id IN (SELECT value FROM json_each(:{param}))"
            return Sql(test if c.op == "~" else f"NOT {test}")
        column = _COLUMNS[c.field]
        none = c.op in ("=", "!=") and str(c.values[0]).lower() == "none"
        if c.field in ("parent", "forked") and none:
            return Sql(f"{column} IS {'NOT ' if c.op == '!=' else ''}NULL")
        return Sql(self.compare(column, c))

    def compare(self, column: str, c: Condition) -> str:
        """``column op value`` for a single-valued column (text, numbers, times)."""
        op, values = c.op, c.values
        if c.whole_day:
            inside = f"({column} >= {self.bind(values[0])} AND {column} < {self.bind(values[1])})"
            return inside if op == "=" else f"({column} IS NULL OR NOT {inside})"
        if op in ("=", ">", ">=", "<", "<="):
            return f"{column} {op} {self.bind(values[0])}"
        if op == "!=":
            return f"({column} IS NULL OR {column} != {self.bind(values[0])})"
        if op == "~":
            return f"instr(lower({column}), {self.bind(str(values[0]).lower())}) > 0"
        if op == "!~":
            return f"coalesce(instr(lower({column}), {self.bind(str(values[0]).lower())}), 0) = 0"
        if op == "starts":
            text = str(values[0])
            return f"substr({column}, 1, {len(text)}) = {self.bind(text)}"
        if op == "between":
            return f"{column} BETWEEN {self.bind(values[0])} AND {self.bind(values[1])}"
        listed = ", ".join(self.bind(v) for v in values)
        if op == "in":
            return f"{column} IN ({listed})"
        return f"({column} IS NULL OR {column} NOT IN ({listed}))"

    def status(self, c: Condition) -> Sql:
        wanted = [str(v) for v in c.values]
        tests = []
        plain = [v for v in wanted if v not in ("stale", "queued")]
        if plain:
            tests.append(f"runs.status IN ({', '.join(self.bind(v) for v in plain)})")
        if "stale" in wanted:
            tests.append(_STALE)
        if "queued" in wanted:
            tests.append("(runs.status = 'pending' AND runs.queued_at_ms IS NOT NULL)")
        clause = " OR ".join(tests)
        negated = c.op in ("!=", "not in")
        return Sql(f"NOT ({clause})" if negated else f"({clause})")

    def multi(self, c: Condition) -> Sql:
        column = _MULTI_COLUMN[c.field]
        positive = {"!=": "=", "!~": "~", "not in": "in"}.get(c.op, c.op)
        test = self.compare(column, c._replace(op=positive))
        sources = " UNION ".join(q.format(test=test) for q in _MULTI_SOURCES[c.field])
        inside = f"runs.run_id IN ({sources})"
        return Sql(inside if positive == c.op else f"NOT {inside}")

    def json_field(self, c: Condition) -> Sql:
        """A field of the input: text compares the value's text (a string as is, a number or
        a boolean as JSON writes it); ordering compares numbers only."""
        keys = ".".join(f'"{part}"' for part in c.path)
        lite_path = f"'$.{keys}'"
        pg_path = "'{" + ",".join(c.path) + "}'"
        lite_text = (
            f"(CASE json_type(runs.input_json, {lite_path}) WHEN 'true' THEN 'true' "
            f"WHEN 'false' THEN 'false' "
            f"ELSE CAST(json_extract(runs.input_json, {lite_path}) AS TEXT) END)"
        )
        pg_text = f"(CAST(runs.input_json AS jsonb) #>> {pg_path})"
        numeric = c.op in (">", ">=", "<", "<=", "between") or (
            c.op in ("=", "!=", "in", "not in")
            and all(isinstance(v, int | float) for v in c.values)
        )
        if numeric:
            lite = (
                f"(CASE WHEN json_type(runs.input_json, {lite_path}) IN ('integer', 'real') "
                f"THEN json_extract(runs.input_json, {lite_path}) END)"
            )
            pg = (
                f"(CASE WHEN jsonb_typeof(CAST(runs.input_json AS jsonb) #> {pg_path}) = "
                f"'number' THEN CAST({pg_text} AS DOUBLE PRECISION) END)"
            )
        else:
            lite, pg = lite_text, pg_text
            c = c._replace(values=tuple(str(v) for v in c.values))
        marker = "\x00column\x00"
        shape = self.compare(marker, c)
        return Sql(shape.replace(marker, lite), shape.replace(marker, pg))


def compile_query(query: Query, now_ms: int) -> Compiled:
    """The ``WHERE`` clause of ``query`` over ``runs`` (``1 = 1`` for an empty query)."""
    compiler = _Compiler(now_ms)
    where = Sql("1 = 1") if query.tree is None else compiler.node(query.tree)
    return Compiled(where, compiler.params, tuple(compiler.fulltext), tuple(compiler.errors))


def page_statement(compiled: Compiled) -> Statement:
    """The matching runs, newest first, one page (``:limit`` and ``:offset``): whole rows, so
    a search lists a run exactly as ``tether runs`` does (its output and workflow path too)."""
    return compiled.statement(
        "SELECT runs.* FROM runs",
        "ORDER BY runs.created_at_ms DESC, runs.run_id DESC LIMIT :limit OFFSET :offset",
    )


def count_statement(compiled: Compiled) -> Statement:
    """How many runs match."""
    return compiled.statement("SELECT count(*) FROM runs")


def top_level_filter(query: Query) -> Query | None:
    """The part of ``query`` every match must pass besides its full-text conditions, when the
    full-text conditions are joined to it by AND at the top (``workflow = x AND text ~ y``):
    the scan then looks only at runs that pass it. None when there is no such part."""
    tree = query.tree
    if tree is None:
        return None
    parts = tree.parts if isinstance(tree, All) else (tree,)
    rest = [p for p in parts if not _has_fulltext(p)]
    if len(rest) == len(parts) or any(
        _has_fulltext(p) and not isinstance(p, Condition) for p in parts
    ):
        return None
    if not rest:
        return None
    return Query(query.text, rest[0] if len(rest) == 1 else All(tuple(rest)))


def _has_fulltext(node: Node) -> bool:
    from store.read.run_query import FULLTEXT_FIELDS, conditions

    return any(c.field in FULLTEXT_FIELDS for c in conditions(node))
