"""``tether migrate --to postgresql://…``: move a SQLite workspace into PostgreSQL."""

from __future__ import annotations

import click

from store.db.database_url import redact_url, refuse_password_in_argument
from store.db.sqlite.sqlite_database import SqliteDatabase
from store.errors import WorkspaceError
from store.model.wording import plural
from store.workspace.layout import Workspace
from tui.cli.common import format_option, run_async, workspace_from, workspace_option
from tui.cli.output import print_json


@click.command("migrate")
@click.option("--to", "target_url", required=True, metavar="URL",
              help="The PostgreSQL database (or schema, with options=-csearch_path=NAME) to copy "
              "into; no password here: use PGPASSWORD or ~/.pgpass.")
@workspace_option
@format_option
@run_async
async def migrate_command(target_url: str, workspace_dir: str | None, output_format: str) -> None:
    """Copy this SQLite workspace (every table, every artifact file) into PostgreSQL and verify
    the counts. All or nothing: a failure or a mismatch leaves the target as it was."""
    from store.db.postgres.pg_database import PostgresDatabase
    from store.workspace.migrate_workspace import migrate_workspace

    url = refuse_password_in_argument(target_url)
    folder = workspace_from(workspace_dir).root  # the folder; its tether.db is the source
    source_workspace = Workspace(folder)
    if not source_workspace.database_path.exists():
        raise WorkspaceError(f"There is no SQLite workspace at {folder} to migrate.")
    async with (
        await SqliteDatabase.open(source_workspace, create=False) as source,
        await PostgresDatabase.open(Workspace(folder, url)) as target,
    ):
        report = await migrate_workspace(source, target)
    shown = redact_url(url)
    if output_format == "json":
        print_json({
            "to": shown,
            "tables": report.tables,
            "artifact_files": report.artifact_files,
            "artifact_bytes": report.artifact_bytes,
        })
        return
    for table, rows in report.tables.items():
        click.echo(f"{table:<20} {plural(rows, 'row'):>14}")
    click.echo(f"{'artifacts':<20} {plural(report.artifact_files, 'file'):>15} "
               f"({plural(report.artifact_bytes, 'byte')})")
    click.echo(f"Copied and verified into {shown}. Point the workspace at it with "
               f"database_url = \"{shown}\" in {folder / 'config.toml'} or TETHER_DATABASE_URL.")


COMMANDS = [migrate_command]
