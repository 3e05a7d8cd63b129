"""``tether runs --where '…'`` (search across runs with the query language of
:mod:`store.read.run_query`, the same one ``/`` uses in the dashboard) and ``tether filters``
(the saved queries both share).

Exit codes: 0 (matches or none), 1 a saved filter or workspace that does not exist, 2 a query
that does not parse (one sentence that says where; nothing is read).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from store.errors import InvalidInputError
from store.model.run_records import RunRecord
from store.read.run_query import Query, all_of, parse_query
from store.read.run_search import ChunkLogs, FolderLogs, LogSource, ScanBounds, search_runs
from store.runs.saved_filters import (
    delete_filter,
    save_filter,
    saved_filter,
    saved_filters,
    validate_filter_name,
)
from store.workspace.layout import Workspace
from tui.cli.common import listing_format_option, run_direct, workspace_from, workspace_option
from tui.cli.database_access import open_database, reading, require_workspace
from tui.cli.output import echo, more_line, page_of, print_json, print_listing, write_json_lines
from tui.plain import visible


def log_source(db: Any) -> LogSource:
    """Where the workspace's attempt logs are: its artifacts folder, or (PostgreSQL) its
    database."""
    if db.backend == "postgresql":
        from store.runs.artifact_chunks import ArtifactChunks

        return ChunkLogs(ArtifactChunks(db))
    return FolderLogs(db.workspace.artifacts_dir)


def combined_query(where: str | None, saved: str | None, status: str | None, now_ms: int) -> Query:
    """One query from ``--where``, a saved filter's text and ``--status`` (joined by AND),
    each parsed on its own (an error points into the text as the user wrote it)."""
    texts = [text for text in (saved, where) if text and text.strip()]
    if status:
        texts.append(f"status = {status}")
    return all_of([parse_query(text, now_ms) for text in texts])


async def search_listing(
    workspace: Workspace,
    *,
    where: str | None,
    filter_name: str | None,
    status: str | None,
    limit: int,
    output_format: str,
    save: str | None,
    scan: int,
) -> None:
    """Print the runs a query matches (newest first), what a full-text scan covered, and save
    the query under ``save`` when asked (before anything is printed; a bad query saves
    nothing)."""
    from store.runs.run_store import RunStore

    require_workspace(workspace)
    if save is not None:
        validate_filter_name(save)
        if not where:
            raise InvalidInputError("--save NAME saves the --where query; give --where too.")
    async with reading(workspace) as db:
        saved_text = None
        if filter_name is not None:
            if db is None:
                raise InvalidInputError(f"There is no saved filter {filter_name!r}.")
            saved_text = (await saved_filter(db, filter_name)).query
        now = RunStore(db).now_ms if db is not None else 0
        query = combined_query(where, saved_text, status, now)
        if save is not None:
            writer = await open_database(workspace, create=True)
            try:
                await save_filter(writer, save, where or "")
            finally:
                await writer.close()
            echo(f"Saved the filter {save!r}.", err=True)
        if db is None:
            result_runs: Sequence[RunRecord] = []
            total, sentence, scan_json = 0, None, None
        else:
            found = await search_runs(
                db, query, now_ms=now, limit=limit, bounds=ScanBounds(runs=scan),
                logs=log_source(db),
            )
            result_runs, total = found.runs, found.total
            sentence = found.scan.sentence() if found.scan else None
            scan_json = found.scan._asdict() if found.scan else None
    page = page_of(result_runs, limit, total)
    if output_format == "json":
        print_json({
            "items": [run.as_dict(now) for run in page.items],
            "more": page.more,
            "query": query.text,
            "scan": scan_json,
        })
        return
    if output_format == "jsonl":
        write_json_lines(run.as_dict(now) for run in page.items)
    else:
        from tui.cli.hot_commands import print_runs

        print_listing(
            "text", page, lambda run: run, lambda runs: print_runs(runs, now),
            empty="No run matches the query.",
            more_text=lambda n: more_line(n, "matching runs"),
        )
    if page.more and output_format == "jsonl":
        echo(more_line(page.more, "matching runs"), err=True)
    if sentence is not None:
        echo(sentence, err=output_format != "text")


@click.group("filters", invoke_without_command=True)
@listing_format_option
@workspace_option
@click.pass_context
def filters_group(ctx: click.Context, output_format: str, workspace_dir: str | None) -> None:
    """Saved run filters (tether runs --filter NAME, F in the dashboard's Runs view)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_command, output_format=output_format, workspace_dir=workspace_dir)


@filters_group.command("list")
@listing_format_option
@workspace_option
@run_direct
async def list_command(output_format: str, workspace_dir: str | None) -> None:
    """List the saved filters by name."""
    workspace = workspace_from(workspace_dir)
    require_workspace(workspace)
    async with reading(workspace) as db:
        items = await saved_filters(db) if db is not None else []

    def print_text(filters: Sequence[Any]) -> None:
        width = max(len(f.name) for f in filters)
        for f in filters:
            echo(f"{visible(f.name):<{width}}  {visible(f.query, keep_newlines=False)}")

    print_listing(
        output_format, page_of(items, len(items) or 1), lambda f: f.as_dict(), print_text,
        empty="No saved filters (tether runs --where QUERY --save NAME saves one).",
        more_text=lambda n: "",
    )


@filters_group.command("save")
@click.argument("name")
@click.argument("query")
@workspace_option
@run_direct
async def save_command(name: str, query: str, workspace_dir: str | None) -> None:
    """Save QUERY (the run query language) under NAME, replacing one saved as NAME."""
    workspace = workspace_from(workspace_dir)
    db = await open_database(workspace, create=True)
    try:
        saved = await save_filter(db, name, query)
    finally:
        await db.close()
    echo(f"Saved the filter {saved.name!r}: {visible(saved.query, keep_newlines=False)}")


@filters_group.command("rm")
@click.argument("name")
@workspace_option
@run_direct
async def rm_command(name: str, workspace_dir: str | None) -> None:
    """Forget the filter saved as NAME."""
    workspace = workspace_from(workspace_dir)
    require_workspace(workspace)
    db = await open_database(workspace, create=False)
    try:
        await delete_filter(db, name)
    finally:
        await db.close()
    echo(f"Forgot the filter {name!r}.")


COMMANDS = [filters_group]
