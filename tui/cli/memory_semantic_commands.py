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

from engine.memory.encoders import load_encoder, unavailable_reason
from engine.memory.recall_mode import MemorySettings, recall_status
from engine.memory.semantic_recall import Embedder
from engine.run.engine_config import load_config
from store.errors import TetherError
from store.search import vectors_sql as vector_sql
from store.search.vector_store import VectorStore
from store.workspace.layout import Workspace
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
    workspace = workspace_from(workspace_dir)
    settings = workspace_memory_settings(workspace)
    if quiet:
        # Detached after a write: one embedder per workspace. A running encoder service (the
        # dashboard's) embeds it with the model it holds; else the lock is taken before the
        # model loads, so a burst of writes never loads more than one model.
        from engine.memory.encoder_service import ask_catch_up

        if ask_catch_up(workspace, settings.encoder):
            return
        with embedder_lock(workspace.root) as held:
            if held and workspace.exists():
                await _embed_until_done(workspace, settings)
        return
    encoder = load_encoder(settings.encoder)
    if encoder is None:
        raise SemanticUnavailableError(
            f"Semantic recall is unavailable: {unavailable_reason(settings.encoder)}.")
    if not workspace.exists():
        click.echo("Nothing to embed: there is no workspace yet.")
        return
    async with open_store(workspace, create=False) as store:
        embedder = Embedder(store.db, encoder)
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
    """Which recall tasks get (hybrid, semantic or keyword, and why), the encoder, how many
    records have vectors for its model and how many still wait for one."""
    workspace = workspace_from(workspace_dir)
    state = recall_status(workspace_memory_settings(workspace))
    vectors = waiting = 0
    if state["model"]:
        async with reading(workspace) as db:  # read-only: a status never changes anything
            if db is not None:
                vectors = int(await db.fetch_value(
                    vector_sql.COUNT_VECTORS, {"model": state["model"]}) or 0)
                # Those only keyword recall finds until the embedder reaches them (counting
                # reads no vector: the dimension does not matter here).
                waiting = await VectorStore(db, state["model"], 0).pending_count()
    if output_format == "json":
        print_json({**state, "vectors": vectors, "waiting": waiting})
        return
    click.echo(state["line"])
    if state["model"]:
        line = f"vectors: {vectors} notes and facts embedded with {state['model']}"
        if waiting:
            line += (f"; {waiting} waiting for one (found by keyword only until embedded in "
                     "the background, or now by `tether memory reindex`)")
        click.echo(line)


async def _embed_until_done(workspace: Workspace, settings: MemorySettings) -> None:
    """Embed what lacks a vector, looping until nothing is left (notes written meanwhile
    included); nothing when no encoder can load (keyword recall still finds everything)."""
    encoder = load_encoder(settings.encoder)
    if encoder is None:
        return
    async with open_store(workspace, create=False) as store:
        embedder = Embedder(store.db, encoder)
        while await embedder.catch_up():
            pass


def workspace_memory_settings(workspace: Workspace) -> MemorySettings:
    """The workspace's ``[memory]`` settings (defaults when it has no config file)."""
    return load_config(workspace.config_path).memory


@memory.command("encoder", hidden=True)
@click.option("--encoder", "encoder_name", default="auto", help="The encoder to serve.")
@click.option("--catch-up", is_flag=True, help="Embed what lacks a vector first.")
@workspace_option
@run_async
async def encoder_command(encoder_name: str, catch_up: bool, workspace_dir: str | None) -> None:
    """Serve the workspace's encoder on a local socket until idle (started on demand by the
    dashboard; see engine/memory/encoder_service.py)."""
    from engine.memory.encoder_service import serve

    status = await serve(workspace_from(workspace_dir), encoder_name, catch_up=catch_up)
    if status:
        raise SemanticUnavailableError(
            f"Semantic recall is unavailable: {unavailable_reason(encoder_name)}.")


COMMANDS = [reindex_command, status_command, encoder_command]
