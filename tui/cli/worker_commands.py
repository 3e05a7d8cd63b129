"""``tether worker``: claim queued runs of a (PostgreSQL) workspace and run them here."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

from engine.run.run_end import RunOutcome
from engine.run.worker import DEFAULT_POLL_S, Worker
from store.db.backends import open_database
from store.errors import InvalidInputError
from store.model.json_columns import recorded_text
from tui.cli.common import database_url_option, run_async, workspace_from, workspace_option
from tui.plain import plural

DAY_S = 86_400.0


@click.command("worker")
@click.option("--concurrency", default=1, show_default=True, type=int,
              help="Runs this worker executes at once.")
@click.option("--lease-seconds", default=30.0, show_default=True, type=float,
              help="How long a claim lasts without a heartbeat; a killed worker's runs are "
              "resumed by another worker after this.")
@click.option("--poll-seconds", default=DEFAULT_POLL_S, show_default=True, type=float,
              help="Fallback check for claimable runs (notifications wake it sooner).")
@click.option("--workflows", "workflow_dirs", multiple=True, metavar="DIR",
              type=click.Path(exists=True, file_okay=False, resolve_path=True),
              help="Run workflow files under DIR (repeatable); a run of any other file (except "
              "the bundled examples) is refused, never imported.")
@click.option("--exit-when-idle", is_flag=True,
              help="Stop once the queue is empty and nothing runs (batch jobs, benchmarks).")
@workspace_option
@database_url_option
@run_async
async def worker_command(
    concurrency: int,
    lease_seconds: float,
    poll_seconds: float,
    exit_when_idle: bool,
    workflow_dirs: tuple[str, ...],
    workspace_dir: str | None,
    database_url: str | None,
) -> None:
    """Claim queued runs (tether run --queue, n in the dashboard) and execute them here.

    Start any number, on any host that reaches the workspace database. Ctrl-C (or SIGTERM)
    stops claiming and gives the runs this worker holds back to the queue at once.
    """
    # Written so that NaN fails too; past a day, a lease or a poll would only hide a dead
    # worker (and 1e30 s would overflow the lease's expiry column).
    if not (1 <= lease_seconds <= DAY_S and 0 < poll_seconds <= DAY_S):
        raise InvalidInputError(
            "--lease-seconds must be from 1 to 86400 and --poll-seconds positive, at most 86400."
        )
    workspace = workspace_from(workspace_dir, database_url)
    # The pool's own notes ("discarding closed connection") would repeat what the worker
    # already says in one sentence when the database drops.
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    def report(run_id: str, outcome: RunOutcome) -> None:
        failed = outcome.error and outcome.status != "finished"
        detail = f" ({recorded_text(outcome.error)})" if failed else ""
        click.echo(f"{run_id} {outcome.status}{detail}", err=True)

    async with await open_database(workspace) as db:
        worker = Worker(
            db,
            concurrency=concurrency,
            lease_ms=int(lease_seconds * 1000),
            poll_s=poll_seconds,
            exit_when_idle=exit_when_idle,
            on_outcome=report,
            on_problem=lambda message: click.echo(f"tether worker: {message}", err=True),
            trusted=[Path(folder) for folder in workflow_dirs],
        )
        trusted = ", ".join(workflow_dirs) or "no folder"
        click.echo(f"worker {worker.worker_id} on {workspace.describe()}; runs workflow files "
                   f"under {trusted} and the bundled examples", err=True)
        summary = await worker.run(stop)
    click.echo(f"worker {summary.worker_id} stopped after {plural(summary.runs, 'run')}", err=True)


COMMANDS = [worker_command]
