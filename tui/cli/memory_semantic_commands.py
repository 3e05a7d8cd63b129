"""``tether memory reindex`` and ``tether memory status``: semantic vectors and which recall is
active.

``reindex`` embeds every note and fact that lacks a vector for the local model, with a
progress bar on stderr (``--quiet``: none; this is what ``notes add``, ``notes import`` and
``memory set`` start in the background, detached, when the semantic extra is installed).
``status`` prints one line saying which recall tasks get (hybrid, or keyword and why), and how
many records have vectors. Attached to the ``memory`` group of :mod:`tui.cli.memory_commands`.
"""

from __future__ import annotations

import sys

import click

from engine.memory.encoder import describe, load_encoder, semantic_available, unavailable_reason
from engine.memory.semantic_recall import Embedder
from store.errors import TetherError
from store.search import vectors_sql as vector_sql
from tui.cli.background import embedder_lock
from tui.cli.common import format_option, run_async, workspace_from, workspace_option
from tui.cli.database_access import reading
from tui.cli.memory_commands import memory, open_store
from tui.cli.output import print_json


class SemanticUnavailableError(TetherError):
    """The semantic extra or its model is missing, so nothing can be embedded. Exit code 3."""

    exit_code = 3


@memory.command("reindex")
@click.option("--quiet", is_flag=True, help="No progress bar (background use).")
@workspace_option
@run_async
async def reindex_command(quiet: bool, workspace_dir: str | None) -> None:
    """Embed every note and fact that has no semantic vector yet (local model, no network)."""
    encoder = load_encoder()
    if encoder is None:
        raise SemanticUnavailableError(f"Semantic recall is unavailable: {unavailable_reason()}.")
    workspace = workspace_from(workspace_dir)
    if not workspace.exists():
        if not quiet:
            click.echo("Nothing to embed: there is no workspace yet.")
        return
    async with open_store(workspace, create=False) as store:
        embedder = Embedder(store.db, encoder)
        if quiet:
            # Detached after a write: one embedder per workspace, looping until nothing is
            # left (notes written meanwhile included).
            with embedder_lock(workspace.root) as held:
                while held and await embedder.catch_up():
                    pass
            return
        total = await embedder.store.pending_count()
        with click.progressbar(length=max(total, 1), label="embedding", show_pos=True,
                               file=sys.stderr) as bar:
            shown = [0]

            def progress(done: int, _total: int) -> None:
                bar.update(done - shown[0])
                shown[0] = done

            done = await embedder.catch_up(progress)
    click.echo(f"Embedded {done} record{'s' if done != 1 else ''} with {encoder.model_id}.")


@memory.command("status")
@workspace_option
@format_option
@run_async
async def status_command(workspace_dir: str | None, output_format: str) -> None:
    """Which recall tasks get (hybrid or keyword, and why), and how many vectors exist."""
    state = describe()
    vectors = 0
    workspace = workspace_from(workspace_dir)
    if semantic_available():
        async with reading(workspace) as db:  # read-only: a status never changes anything
            if db is not None:
                vectors = int(await db.fetch_value(
                    vector_sql.COUNT_VECTORS, {"model": state["model"]}) or 0)
    if output_format == "json":
        print_json({**state, "vectors": vectors})
        return
    click.echo(state["line"])
    if state["model"]:
        click.echo(f"vectors: {vectors} notes and facts embedded")


COMMANDS = [reindex_command, status_command]
