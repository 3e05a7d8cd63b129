"""``tether replay RUN [--at N | --at-time ISO]``: the run as it was at one event of its log.

Prints the node states, attempts and tokens so far (per node and for the run), the memory
blocks recall had saved and the notes the run had proposed, folded from the run's event log
(:mod:`store.read.replay`); the last event by default. Read-only: nothing is executed and
nothing is written. ``r`` in a run's view of the dashboard scrubs the same log.
"""

from __future__ import annotations

import click

from store.errors import InvalidInputError
from store.read.replay_reads import notes_text, read_history
from tui.cli.common import format_option, run_direct, workspace_from, workspace_option
from tui.cli.history_commands import reading_runs
from tui.cli.output import echo, print_json
from tui.replay_text import cursor_position, parse_moment, replay_document, replay_lines


@click.command("replay")
@click.argument("run_id", metavar="RUN")
@click.option("--at", "at", type=int, default=None, metavar="N",
              help="The run right after its Nth event (1 is the first; default: the last).")
@click.option("--at-time", "at_time", default=None, metavar="ISO",
              help="The run as it was at this time (ISO 8601, UTC unless it says otherwise).")
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@format_option
@workspace_option
@run_direct
async def replay_command(run_id: str, at: int | None, at_time: str | None, as_json: bool,
                         output_format: str, workspace_dir: str | None) -> None:
    """Show RUN as it was at one event of its log: node states, tokens so far, memory blocks,
    proposed notes (read-only)."""
    if at is not None and at_time is not None:
        raise InvalidInputError("Give --at or --at-time, not both.")
    at_ms = parse_moment(at_time) if at_time is not None else None
    async with reading_runs(workspace_from(workspace_dir), run_id) as (db, _now):
        try:
            history = await read_history(db, run_id)
        except ValueError as error:
            raise InvalidInputError(f"Run {run_id} has no events to replay.") from error
        state = history.log.at(cursor_position(history.log, at, at_ms))
        notes = await notes_text(db, [note.note_id for note in state.notes])
    if as_json or output_format == "json":
        print_json(replay_document(history.run, state, notes, history.cut))
        return
    for line in replay_lines(history.run, state, notes, history.cut):
        echo(line)


COMMANDS = [replay_command]
