"""``tether mcp``: serve the memory tools to an agent CLI over the Model Context Protocol.

Exit codes: 0 when the client closed the connection; 2 invalid options (a bad bank, tag or
budget, a missing MCP SDK) or an unusable workspace.
"""

from __future__ import annotations

import importlib.util

import click

from engine.memory.mcp_server import McpOptions, serve_stdio
from store.errors import InvalidInputError
from tui.cli.common import (
    WHOLE_NUMBER,
    database_url_option,
    run_async,
    workspace_from,
    workspace_option,
)


@click.command("mcp")
@click.option("--bank", "banks", multiple=True, required=True, help="Memory bank (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Tag scope for recall and saved notes.")
@click.option("--budget-bytes", type=int, default=None, help="Recall byte budget (default 2048).")
@click.option(
    "--status",
    type=click.Choice(["pending", "accepted"]),
    default="pending",
    show_default=True,
    help="Status of notes saved with remember (pending: a person reviews them first).",
)
@click.option("--run", "run_id", default=None, help="Provenance: the run the notes come from.")
@click.option("--node", "node_id", default=None, help="Provenance: the node of that run.")
@click.option("--iteration", type=WHOLE_NUMBER, default=0,
              help="Provenance: the node's loop iteration.")
@click.option("--attempt", type=WHOLE_NUMBER, default=None,
              help="Provenance: the node's attempt.")
@workspace_option
@database_url_option
@run_async
async def mcp_command(
    banks: tuple[str, ...],
    tags: tuple[str, ...],
    budget_bytes: int | None,
    status: str,
    run_id: str | None,
    node_id: str | None,
    iteration: int,
    attempt: int | None,
    workspace_dir: str | None,
    database_url: str | None,
) -> None:
    """Serve remember and recall over MCP on stdin/stdout (for Claude Code, Codex, ...).

    Example: claude mcp add tether -- tether mcp --bank code-review
    """
    if importlib.util.find_spec("mcp") is None:
        raise InvalidInputError(
            "tether mcp needs the MCP SDK, a dependency of Tether that is missing from this "
            "installation; install it with: pip install 'mcp>=2.3,<3'."
        )
    options = McpOptions(
        banks=banks,
        tags=tags,
        budget_bytes=budget_bytes,
        status=status,
        run_id=run_id,
        node_id=node_id,
        iteration=iteration,
        attempt=attempt,
    )
    options.memory_config()  # refuse bad banks, tags or budgets before touching the workspace
    await serve_stdio(workspace_from(workspace_dir, database_url), options)


COMMANDS = [mcp_command]
