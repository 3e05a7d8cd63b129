"""The bodies of the commands agents' hooks and scripts call in loops: ``tether memory get``,
``tether notes add`` and ``tether runs``.

They are free of click (and of dataclasses, asyncio and the engine) so that
:mod:`tui.cli.entry` can run them straight from the command line: Python starts in about 11 ms,
and importing click alone would add 20. The click commands in ``memory_commands``,
``notes_commands`` and ``runs_commands`` call these same functions, so both ways of reaching a
command do the same thing and print the same bytes.

Each body is given the workspace already resolved (as :func:`tui.cli.common.run_direct` does
before running any body) and raises Tether errors for its caller to turn into one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from store.workspace.layout import Workspace
from tui.cli.output import echo

if TYPE_CHECKING:
    from store.model.run_records import RunRecord

# Each body imports what it needs itself: a command pays only for its own modules.

DEFAULT_RUNS_LIMIT = 50
"""How many runs ``tether runs`` lists without ``--limit``."""


async def memory_get(workspace: Workspace, namespace: str, key: str, output_format: str) -> None:
    """Print the JSON value stored at ``namespace`` ``key`` exactly as it was set (or the
    whole fact as JSON); NotFoundError when there is none."""
    from store.errors import NotFoundError
    from store.memory.facts import validate_key
    from store.memory.namespaces import validate_namespace
    from tui.cli.database_access import reading_store
    from tui.cli.output import print_json

    ns = validate_namespace(namespace)
    validate_key(key)
    fact = None
    async with reading_store(workspace) as store:
        if store is not None:
            fact = await store.get_fact(ns, key)
    if fact is None:
        raise NotFoundError(f"There is no fact {key!r} in namespace {str(ns)!r}.")
    if output_format == "json":
        print_json(fact.to_json())
    else:
        echo(fact.value_json)


async def notes_add(
    workspace: Workspace,
    namespace: str,
    body: str,
    *,
    status: str,
    supersedes: Sequence[str],
    tags: Sequence[str],
    kind: str | None,
) -> None:
    """Append a note (``body`` '-' reads stdin, '@FILE' a file) and print its id; then start
    the background embedder when semantic recall is installed."""
    from store.memory.namespaces import validate_namespace
    from store.memory.note_rules import validate_body, validate_label, validate_tags
    from tui.cli.arguments import read_text_argument
    from tui.cli.database_access import open_store

    ns = validate_namespace(namespace)
    text = validate_body(read_text_argument(body, "the note body"))
    validate_tags(tags)
    for target in supersedes:
        validate_label(target, "a superseded note id")
    if kind is not None:
        validate_label(kind, "the note kind")
    async with open_store(workspace, create=True) as store:
        note = await store.save_note(
            ns,
            text,
            status=status,
            supersedes=supersedes,
            tags=tags,
            kind=kind,
            author="cli",
        )
    echo(note.id)
    from tui.cli.background import embed_in_background  # only after a write: start-up

    embed_in_background(workspace)


async def list_runs(
    workspace: Workspace, *, status: str | None, limit: int, output_format: str
) -> None:
    """List runs newest first (at most ``limit``, then how many more), as text or JSON."""
    from store.db.paging import MORE_COUNT_CAP
    from store.runs.run_store import RunStore
    from tui.cli.database_access import reading, require_workspace
    from tui.cli.output import Page, more_line, page_of, print_listing

    require_workspace(workspace)
    page = Page([], 0)
    now = 0
    async with reading(workspace) as db:  # read-only: a listing never changes anything
        if db is not None:
            store = RunStore(db)
            records = await store.list_runs(status=status, limit=limit)
            total = len(records)
            if total == limit:
                total = await store.count_runs(status=status, upto=limit + MORE_COUNT_CAP)
            page = page_of(records, limit, total)
            now = store.now_ms
    print_listing(
        output_format,
        page,
        lambda run: run.as_dict(now),
        lambda runs: print_runs(runs, now),
        empty="No runs.",
        more_text=lambda n: more_line(n, "runs", MORE_COUNT_CAP),
    )


def fork_origin(run: RunRecord) -> str:
    """Where a fork comes from, ``RUN:NODE`` (``-`` for a run that is no fork)."""
    if run.forked_from is None:
        return "-"
    from tui.plain import visible

    node = visible(run.fork_node or "?", keep_newlines=False)
    return f"{run.forked_from}:{node}"


def print_runs(runs: Sequence[RunRecord], now: int) -> None:
    """The runs as the text table ``tether runs`` prints."""
    from tui.plain import budget_used, duration, spent, tokens, visible

    echo(
        f"{'RUN':<16} {'WORKFLOW':<22} {'STATUS':<11} {'GEN':>3} {'PARENT':<16} {'FORKED':<24} "
        f"{'NODES':>7} {'TOKENS':>8} {'COST':>10} {'BUDGET':>12} {'AGE':>8}"
    )
    for r in runs:
        paid = spent(r.tokens.total, r.cost.usd, r.cost.unpriced_calls)
        echo(
            f"{r.run_id:<16} {visible(r.workflow, keep_newlines=False)[:22]:<22} "
            f"{r.display_status(now):<11} {r.generation:>3} {r.parent_run_id or '-':<16} "
            f"{fork_origin(r):<24} "
            f"{f'{r.nodes_done}/{r.nodes_total}':>7} {tokens(r.tokens.total):>8} "
            f"{paid:>10} {budget_used(r) or '-':>12} {duration(now - r.created_at_ms):>8}"
        )
