"""``tether memory summarize``: fold each thread's older messages into one summary message.

Runs the store's Summarizer processor with an engine agent (``--agent``, else
``[memory] summarizer_agent`` in ``.tether/config.toml``, else the simulated agent). Attached to
the ``memory`` group defined in :mod:`tui.cli.memory_commands`.
"""

from __future__ import annotations

import click

from engine.agents.registry import AgentRegistry
from engine.memory.summarize import agent_summarize_fn, summarizer_agent_name
from engine.run.engine_config import load_config
from store.memory.processors import KEEP_RECENT, Summarizer
from tui.cli.common import run_async, workspace_from, workspace_option
from tui.cli.memory_commands import memory, open_store


@memory.command("summarize")
@click.option("--agent", "agent_name", default=None, metavar="NAME",
              help="Agent that writes the summaries (default: config or simulated).")
@click.option("--keep-recent", type=click.IntRange(0, None), default=KEEP_RECENT,
              show_default=True, help="Newest messages per thread kept verbatim.")
@workspace_option
@run_async
async def summarize_command(agent_name: str | None, keep_recent: int,
                            workspace_dir: str | None) -> None:
    """Summarize every thread's older messages with an agent (the Summarizer processor)."""
    workspace = workspace_from(workspace_dir)
    name = summarizer_agent_name(workspace.config_path, agent_name)
    agent = AgentRegistry({}, load_config(workspace.config_path).agents).get(name)
    summaries = removed = 0
    if workspace.exists():
        async with open_store(workspace, create=False, direct=False) as store:
            result = await Summarizer(agent_summarize_fn(agent), keep_recent=keep_recent).process(
                store
            )
            summaries, removed = result.summaries_written, result.messages_removed
    click.echo(
        f"Wrote {summaries} summar{'ies' if summaries != 1 else 'y'} replacing {removed} "
        f"message{'s' if removed != 1 else ''} (agent {name})."
    )


# The command registers itself on the ``memory`` group, which imports this module lazily.
COMMANDS: list[click.Command] = []
