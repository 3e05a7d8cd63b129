"""The tool calls of an attempt an agent CLI made, read from its stream log for the timeline:
the log is read (at most :data:`TOOL_LOG_BYTES` of it), parsed by
:func:`engine.agents.cli.tool_log.logged_tools` and placed between the attempt's model calls
(:func:`store.read.timeline.place_logged_tools`). The memory tools' own events (exact times)
come with the details already."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.agents.cli.tool_log import logged_tools
from engine.artifact_files import stream_log_path
from store.read.run_search import ChunkLogs, FolderLogs, LogSource
from store.read.timeline import NodeDetail, place_logged_tools
from store.read.timeline_reads import merge_tools
from store.workspace.layout import Workspace

TOOL_LOG_BYTES = 4 * 1024 * 1024
"""How much of one attempt's log is read for its tool calls (a longer log: its first part)."""


def log_source_for(workspace: Workspace, rows: Any) -> LogSource:
    """The logs of the workspace: its artifacts folder, or the chunks of a PostgreSQL one (the
    dashboard's reader has them as ``chunks``; a Database, built on it)."""
    chunks = getattr(rows, "chunks", None)
    if chunks is not None:
        return ChunkLogs(chunks)
    if workspace.is_shared:
        from store.runs.artifact_chunks import ArtifactChunks

        return ChunkLogs(ArtifactChunks(rows))
    return FolderLogs(workspace.artifacts_dir)


async def with_logged_tools(
    workspace: Workspace, logs: LogSource, run_id: str, node_key: str, detail: NodeDetail,
    now_ms: int,
) -> tuple[NodeDetail, bool]:
    """``detail`` with the tool calls its attempts' logs show; True when a log was longer than
    what was read."""
    node_id, _, iteration_text = node_key.rpartition("#")
    iteration = int(iteration_text or 0)
    placed = []
    cut = False
    for attempt in detail.attempts:
        if attempt.cached:
            continue
        path = stream_log_path(workspace.artifacts_dir, run_id, node_id, iteration,
                               attempt.attempt)
        where = str(path) if isinstance(logs, FolderLogs) else _relative(workspace, path)
        data = await logs.read(where, 0, TOOL_LOG_BYTES + 1)
        if not data:
            continue
        cut = cut or len(data) > TOOL_LOG_BYTES
        lines = data[:TOOL_LOG_BYTES].decode("utf-8", "replace").splitlines()
        found = logged_tools(lines)
        placed.extend(place_logged_tools(node_key, attempt, detail.calls, found, now_ms))
    return merge_tools(detail, placed), cut


def _relative(workspace: Workspace, path: Path) -> str:
    return path.relative_to(workspace.artifacts_dir).as_posix()
