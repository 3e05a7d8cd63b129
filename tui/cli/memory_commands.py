"""``tether memory``: read and edit facts, and run the maintenance processors.

Commands validate every argument before opening the workspace, so bad input changes nothing
(and never creates a workspace). Reading commands never create a workspace either: ``list``
on a missing one prints an empty listing, ``get`` exits 1. Values are shown literally: control
characters are made visible, and colour is used only when stdout is a terminal.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from store.db.paging import MORE_COUNT_CAP
from store.errors import NotFoundError
from store.memory.facts import MAX_TTL_MS, Fact, parse_value_json, validate_key
from store.memory.namespaces import canonical_namespace, validate_namespace
from store.memory.processors import TokenLimiter, TtlCollector
from store.memory.ttl import parse_ttl
from tui.cli.arguments import read_text_argument
from tui.cli.background import embed_in_background
from tui.cli.common import (
    format_option,
    limit_option,
    listing_format_option,
    run_direct,
    workspace_from,
    workspace_option,
)
from tui.cli.database_access import open_store, reading_store
from tui.cli.hot_commands import memory_get
from tui.cli.lazy import LazyGroup
from tui.cli.output import Page, more_line, page_of, print_listing
from tui.plain import ago, duration, visible

VALUE_WIDTH = 60
DEFAULT_FACTS_LIMIT = 200


# -- helpers shared with notes_commands ---------------------------------------------------------


def one_line(text: str, width: int) -> str:
    """``text`` on one visible line, cut to ``width`` characters with an ellipsis."""
    flat = visible(text, keep_newlines=False).replace("\n", " ")
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class TtlType(click.ParamType):
    """``--ttl``: milliseconds, or a duration such as 30s, 5m, 2h or 7d (as in the dashboard)."""

    name = "TTL"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        # parse_ttl's own sentence offers "blank" (the dashboard's editor clears a TTL so);
        # on the command line a blank --ttl is refused, so one sentence for both.
        try:
            ttl_ms = parse_ttl(str(value))
        except ValueError:
            ttl_ms = None
        if ttl_ms is None:
            self.fail("TTL must be a duration above 0 such as 90000, 30s, 5m, 2h or 7d.", param,
                      ctx)
        if ttl_ms > MAX_TTL_MS:
            self.fail(f"TTL must be at most {MAX_TTL_MS} ms (100 years).", param, ctx)
        return ttl_ms


def styled(text: str, **style: object) -> str:
    """Colour ``text`` only when stdout is a terminal (``click.echo`` strips it otherwise)."""
    return click.style(text, **style)  # type: ignore[arg-type]


# -- commands -----------------------------------------------------------------------------------


@click.group(
    "memory",
    cls=LazyGroup,
    lazy_commands={
        "summarize": "tui.cli.memory_summarize_commands",
        "reindex": "tui.cli.memory_semantic_commands",
        "status": "tui.cli.memory_semantic_commands",
        "encoder": "tui.cli.memory_semantic_commands",
    },
)
def memory() -> None:
    """Facts (namespaced JSON values) and the memory maintenance processors."""


@memory.command("list")
@click.argument("namespace", required=False)
@limit_option(DEFAULT_FACTS_LIMIT, "facts")
@workspace_option
@listing_format_option
@run_direct
async def list_command(
    namespace: str | None, limit: int, workspace_dir: str | None, output_format: str
) -> None:
    """Every fact, grouped by namespace, or the facts of one NAMESPACE."""
    wanted = None if namespace is None else canonical_namespace(validate_namespace(namespace))
    workspace = workspace_from(workspace_dir)
    page = Page([], 0)
    now = 0
    async with reading_store(workspace) as store:
        if store is not None:
            facts = await store.list_facts(wanted, limit=limit)
            more = 0
            if len(facts) == limit:
                more = await store.count_facts(wanted, upto=limit + MORE_COUNT_CAP) - limit
            page = page_of(facts, limit, len(facts) + more)
            now = store.now_ms()
    where = f" in namespace {one_line(wanted, 80)}" if wanted else ""
    print_listing(
        output_format,
        page,
        Fact.to_json,
        lambda facts: _print_facts(facts, now),
        empty=f"No facts{where}.",
        more_text=lambda n: more_line(n, "facts", MORE_COUNT_CAP),
    )


def _print_facts(facts: Sequence[Fact], now: int) -> None:
    key_width = min(24, max(len(one_line(fact.key, 24)) for fact in facts))
    current = None
    for fact in facts:
        if fact.namespace != current:
            if current is not None:
                click.echo()
            current = fact.namespace
            click.echo(styled(one_line(fact.namespace, 100), bold=True))
        parts = [
            "  " + styled(one_line(fact.key, 24).ljust(key_width), fg="cyan"),
            one_line(fact.value_json, VALUE_WIDTH),
            styled(ago(now, fact.updated_at_ms), dim=True),
        ]
        remaining = fact.ttl_remaining_ms(now)
        if remaining is not None:
            parts.append(styled(f"expires in {duration(remaining)}", fg="yellow"))
        if fact.run_id:
            where = fact.run_id if fact.node_id is None else f"{fact.run_id}/{fact.node_id}"
            parts.append(styled(f"by {one_line(where, 40)}", dim=True))
        click.echo("  ".join(parts))


@memory.command("get")
@click.argument("namespace")
@click.argument("key")
@workspace_option
@format_option
@run_direct
async def get_command(
    namespace: str, key: str, workspace_dir: str | None, output_format: str
) -> None:
    """Print the JSON value stored at NAMESPACE KEY exactly as it was set."""
    await memory_get(workspace_from(workspace_dir), namespace, key, output_format)


@memory.command("set")
@click.argument("namespace")
@click.argument("key")
@click.argument("value")
@click.option(
    "--ttl",
    "ttl_ms",
    type=TtlType(),
    default=None,
    help="Expire the fact this long after this write: milliseconds, or 30s, 5m, 2h, 7d.",
)
@workspace_option
@run_direct
async def set_command(
    namespace: str, key: str, value: str, ttl_ms: int | None, workspace_dir: str | None
) -> None:
    """Store VALUE (JSON text; '-' reads stdin, '@FILE' a file) at NAMESPACE KEY."""
    ns = validate_namespace(namespace)
    validate_key(key)
    value_json = parse_value_json(read_text_argument(value, "the value"))
    workspace = workspace_from(workspace_dir)
    async with open_store(workspace, create=True) as store:
        fact = await store.set_fact_json(ns, key, value_json, ttl_ms=ttl_ms)

    embed_in_background(workspace)
    expiry = "" if ttl_ms is None else f" (expires in {duration(ttl_ms)})"
    click.echo(f"Set {one_line(fact.key, 60)} in {one_line(fact.namespace, 80)}{expiry}.")


@memory.command("rm")
@click.argument("namespace")
@click.argument("key")
@workspace_option
@run_direct
async def rm_command(namespace: str, key: str, workspace_dir: str | None) -> None:
    """Delete the fact at NAMESPACE KEY."""
    ns = validate_namespace(namespace)
    validate_key(key)
    workspace = workspace_from(workspace_dir)
    removed = False
    if workspace.exists():
        async with open_store(workspace, create=False) as store:
            removed = await store.delete_fact(ns, key)
    if not removed:
        raise NotFoundError(f"There is no fact {key!r} in namespace {str(ns)!r}.")
    click.echo(f"Removed {one_line(key, 60)} from {one_line(str(ns), 80)}.")


@memory.command("gc")
@workspace_option
@run_direct
async def gc_command(workspace_dir: str | None) -> None:
    """Remove expired facts (the TTL collector)."""

    workspace = workspace_from(workspace_dir)
    removed = 0
    if workspace.exists():
        async with open_store(workspace, create=False) as store:
            removed = (await TtlCollector().process(store)).facts_removed
    click.echo(f"Removed {removed} expired fact{'s' if removed != 1 else ''}.")


@memory.command("limit")
@click.option(
    "--max-tokens",
    type=click.IntRange(0, None),
    required=True,
    metavar="N",
    help="Token budget per thread (about 4 characters per token).",
)
@workspace_option
@run_direct
async def limit_command(max_tokens: int, workspace_dir: str | None) -> None:
    """Trim every thread to N tokens by removing its oldest messages (the token limiter)."""

    limiter = TokenLimiter(max_tokens)
    workspace = workspace_from(workspace_dir)
    removed = threads = 0
    if workspace.exists():
        async with open_store(workspace, create=False) as store:
            result = await limiter.process(store)
            removed, threads = result.messages_removed, result.threads_changed
    click.echo(
        f"Removed {removed} message{'s' if removed != 1 else ''} from {threads} "
        f"thread{'s' if threads != 1 else ''} to keep each within {max_tokens} tokens."
    )


COMMANDS = [memory]
