"""``tether doctor``: check a workspace (files, permissions, integrity, schema, WAL, the owners
of running runs, its config.toml) without changing it, and say how to recover.

Exit codes: 0 nothing wrong (warnings are printed), 1 no workspace there, 3 something is wrong.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from store.db.sqlite.database_file import database_file_exists
from store.errors import InvalidInputError, NotFoundError
from store.model.wording import plural
from store.workspace.doctor import (
    FAIL,
    WARN,
    Finding,
    clear_stale_damage_mark,
    examine,
    recovery_steps,
)
from store.workspace.layout import Workspace
from store.workspace.salvage import salvage
from tui.cli.common import (
    database_url_option,
    format_option,
    run_async,
    workspace_from,
    workspace_option,
)
from tui.cli.output import print_json
from tui.format import visible

MARKS = {"ok": "ok  ", WARN: "warn", FAIL: "FAIL"}


def _exit_code(findings: list[Finding]) -> int:
    if any(f.check == "workspace" for f in findings if f.level == FAIL):
        return 1
    return 3 if any(f.level == FAIL for f in findings) else 0


@click.command("doctor")
@click.option(
    "--clear-damage-mark", is_flag=True,
    help="Remove the damage mark when the full integrity check now passes.",
)
@click.option(
    "--salvage-to", "salvage_dir", metavar="DIR", default=None,
    help="Copy every readable row into a new workspace at DIR (the damaged one is only read).",
)
@workspace_option
@database_url_option
@format_option
def doctor_command(
    clear_damage_mark: bool, salvage_dir: str | None, workspace_dir: str | None,
    database_url: str | None, output_format: str,
) -> None:
    """Check the workspace and say how to recover; changes nothing (see --clear-damage-mark,
    --salvage-to)."""
    workspace = workspace_from(workspace_dir, database_url)
    if salvage_dir is not None and not workspace.is_shared:
        _salvage(workspace, Workspace(Path(salvage_dir).expanduser().resolve()), output_format)
        return
    now_ms = int(time.time() * 1000)
    if workspace.is_shared:
        if salvage_dir is not None or clear_damage_mark:
            raise InvalidInputError(
                "--salvage-to and --clear-damage-mark are for a SQLite workspace; PostgreSQL "
                "keeps its own integrity."
            )
        findings = _examine_postgres(workspace, now_ms)
    else:
        findings = examine(workspace, now_ms)
    findings.extend(_config(workspace, findings))
    cleared = clear_damage_mark and clear_stale_damage_mark(workspace, findings)
    if cleared:
        findings = [f for f in findings if f.check != "damage"]
    code = _exit_code(findings)
    damaged = any(f.level == FAIL and f.check in ("integrity", "damage") for f in findings)
    steps = recovery_steps(workspace) if damaged else []
    if output_format == "json":
        print_json({
            "workspace": workspace.describe(),
            "healthy": code == 0,
            "findings": [f.as_dict() for f in findings],
            "damage_mark_cleared": bool(cleared),
            "recovery": steps,
        })
    else:
        for finding in findings:
            click.echo(f"{MARKS[finding.level]}  {finding.check:<12} {visible(finding.message)}")
        if cleared:
            click.echo("Removed the damage mark: the full integrity check passes now.")
        if steps:
            click.echo()
            click.echo("How to recover the database with SQLite's .recover:")
            for line in steps:
                click.echo(f"  {line}")
    if code:
        raise SystemExit(code)


def _config(workspace: Workspace, findings: list[Finding]) -> list[Finding]:
    """``config.toml`` read as ``tether run`` reads it: one it refuses stops every run, so a
    doctor that passed it by would call the workspace healthy while nothing can start."""
    from engine.run.engine_config import load_config

    path = workspace.config_path
    if any(f.check == "workspace" for f in findings) or not path.exists():
        return []
    try:
        load_config(path)
    except InvalidInputError as error:
        return [Finding(FAIL, "config", f"{str(error).rstrip('.')}; tether run refuses to "
                        "start until it is fixed.")]
    return [Finding("ok", "config", f"{path} is a config tether run accepts.")]


@run_async
async def _examine_postgres(workspace: Workspace, now_ms: int) -> list[Finding]:
    from store.workspace.pg_doctor import examine_postgres

    return await examine_postgres(workspace, now_ms)


@run_async
async def _salvage(workspace: Workspace, target: Workspace, output_format: str) -> None:
    if not database_file_exists(workspace.database_path):
        raise NotFoundError(f"There is no Tether workspace at {workspace.root}.")
    if target.root == workspace.root:
        raise InvalidInputError("--salvage-to must name a new folder, not the workspace itself.")
    results = await salvage(workspace.database_path, target)
    if output_format == "json":
        print_json({"salvaged_to": str(target.root),
                    "tables": [{"table": r.table, "rows": r.rows, "problem": r.problem}
                               for r in results]})
        return
    for result in results:
        note = f" (part unreadable: {visible(result.problem)})" if result.problem else ""
        click.echo(f"{result.table:<20} {plural(result.rows, 'row'):>12}{note}")
    click.echo(f"Salvaged into {target.root}; check it with: tether doctor --workspace "
               f"{target.root}")


COMMANDS = [doctor_command]
