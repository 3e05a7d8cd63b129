"""Searching runs with the query language: one page of matching runs, newest first, the exact
count, and, for full-text conditions, a scan with a bound that is reported.

Structured conditions (status, workflow, times, cost, tokens, agent, model, input fields,
errors) are one indexed query over every run (:mod:`store.read.run_query_sql`). Prompts,
outputs and logs are too large to index exactly at the speed runs are written, so a full-text
condition is answered by scanning, exactly, a bounded window: the newest
:attr:`ScanBounds.runs` runs that pass the rest of the query (when the full-text part is joined
to it by AND; else the newest runs of all), and at most :attr:`ScanBounds.log_bytes` of their
logs, newest runs first. :class:`TextScan` says what the window covered and what it left out,
so the command line and the dashboard can say so. Matching is case-insensitive for ASCII
letters; what is compared is the text as stored.

The reads take any :class:`Rows` (a workspace :class:`~store.db.seam.Database` or the
dashboard's reader), so the command line and the dashboard run the same code on both backends.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from store.db.seam import Params
from store.model.run_records import RunRecord
from store.read.off_loop import off_the_loop
from store.read.run_query import Query
from store.read.run_query_sql import (
    ERROR_RUNS,
    Compiled,
    compile_query,
    count_statement,
    page_statement,
    top_level_filter,
)

LOG_NAMES = ("stream.log", "stderr.log")
"""The attempt files a full-text search reads as logs."""
READ_CHUNK = 1024 * 1024


class Rows(Protocol):
    """Anything that runs a read and returns its rows (a Database, the dashboard's reader)."""

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Any]: ...


class ScanBounds(NamedTuple):
    """How much a full-text condition may read: the newest ``runs`` runs, and at most
    ``log_bytes`` of their logs."""

    runs: int = 2000
    log_bytes: int = 64 * 1024 * 1024


class TextScan(NamedTuple):
    """What a full-text scan covered: runs searched of the runs it could have searched, and
    log bytes read of the bytes those runs' logs hold; ``kinds`` says what was searched
    (prompts, outputs, logs)."""

    runs_searched: int
    runs_eligible: int
    log_bytes_read: int
    log_bytes_left: int
    log_files_left: int
    kinds: tuple[str, ...] = ("prompts", "outputs", "logs")

    @property
    def complete(self) -> bool:
        """True when nothing eligible was left out."""
        return self.runs_searched >= self.runs_eligible and not self.log_bytes_left

    def sentence(self) -> str:
        """What the scan covered, in one sentence."""
        kinds = list(self.kinds)
        what = kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " and " + kinds[-1]
        what = what[:1].upper() + what[1:]
        if self.runs_searched >= self.runs_eligible:
            text = f"{what} of all {self.runs_eligible:,} eligible runs were searched"
        else:
            text = (
                f"{what} were searched in the newest {self.runs_searched:,} of "
                f"{self.runs_eligible:,} eligible runs (--scan N searches more)"
            )
        if self.log_bytes_left:
            text += (
                f"; {_size(self.log_bytes_left)} of logs in {self.log_files_left:,} files "
                f"were not read (the log bound is {_size(self.log_bytes_read)})"
            )
        return text + "."


def _size(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


class RunSearch(NamedTuple):
    """One page of the runs a query matches (newest first), how many match in all, and the
    full-text scan's coverage (None when the query has no full-text condition)."""

    query: Query
    runs: list[RunRecord]
    total: int
    scan: TextScan | None = None


class LogSource(Protocol):
    """Where a run's attempt logs are: files (SQLite workspace) or database chunks."""

    async def files(self, run_id: str) -> list[tuple[str, int]]:
        """``(path, size)`` of each log of the run."""
        ...

    async def read(self, path: str, offset: int, size: int) -> bytes:
        """``size`` bytes of ``path`` from ``offset`` (fewer at its end)."""
        ...


class FolderLogs:
    """Logs in the workspace's ``artifacts/`` folder (read in a thread when an event loop
    runs: the dashboard's never waits on a disk)."""

    def __init__(self, artifacts_dir: Path) -> None:
        self.root = artifacts_dir

    async def files(self, run_id: str) -> list[tuple[str, int]]:
        return await off_the_loop(self._files, run_id)

    def _files(self, run_id: str) -> list[tuple[str, int]]:
        from store.errors import InvalidInputError
        from store.runs.artifact_paths import run_dir

        try:
            folder = run_dir(self.root, run_id)
        except InvalidInputError:
            return []
        found: list[tuple[str, int]] = []
        for here, _dirs, names in os.walk(folder):  # never follows a link out of the folder
            for name in sorted(names):
                if name in LOG_NAMES:
                    path = Path(here, name)
                    try:
                        found.append((str(path), path.lstat().st_size))
                    except OSError:
                        continue
        return sorted(found)

    async def read(self, path: str, offset: int, size: int) -> bytes:
        return await off_the_loop(self._read, path, offset, size)

    @staticmethod
    def _read(path: str, offset: int, size: int) -> bytes:
        try:
            with open(path, "rb") as handle:  # an artifact log, never the database
                handle.seek(offset)
                return handle.read(size)
        except OSError:
            return b""


class ChunkLogs:
    """Logs kept as chunks in the database of a PostgreSQL workspace."""

    def __init__(self, chunks: Any) -> None:
        self.chunks = chunks

    async def files(self, run_id: str) -> list[tuple[str, int]]:
        stored = await self.chunks.files(run_id)
        return [(f.path, f.size) for f in stored if f.path.rsplit("/", 1)[-1] in LOG_NAMES]

    async def read(self, path: str, offset: int, size: int) -> bytes:
        data: bytes = await self.chunks.read(path, offset, size)
        return data


def ascii_lower(text: str) -> str:
    """``text`` with ASCII letters lowered only (what SQLite's ``lower`` does)."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


_TEXT_SQL = {
    "prompt": (
        "SELECT DISTINCT run_id FROM attempts WHERE run_id IN (SELECT value FROM "
        "json_each(:window)) AND instr(lower(prompt), :needle) > 0",
    ),
    "output": (
        "SELECT DISTINCT run_id FROM attempts WHERE run_id IN (SELECT value FROM "
        "json_each(:window)) AND instr(lower(response_text), :needle) > 0",
        "SELECT DISTINCT run_id FROM nodes WHERE run_id IN (SELECT value FROM "
        "json_each(:window)) AND instr(lower(output_json), :needle) > 0",
        "SELECT run_id FROM runs WHERE run_id IN (SELECT value FROM json_each(:window)) "
        "AND instr(lower(output_json), :needle) > 0",
    ),
}


async def with_error_runs(rows: Rows, compiled: Compiled) -> Compiled:
    """``compiled`` with each error condition's runs read (:data:`ERROR_RUNS`) into its
    parameter."""
    for error in compiled.errors:
        found = await rows.fetch_all(ERROR_RUNS, {"needle": error.needle})
        compiled.params[error.param] = json.dumps(sorted(str(row[0]) for row in found))
    return compiled


async def search_runs(
    rows: Rows,
    query: Query,
    *,
    now_ms: int,
    limit: int = 50,
    offset: int = 0,
    bounds: ScanBounds = ScanBounds(),
    logs: LogSource | None = None,
) -> RunSearch:
    """The runs ``query`` matches: the page ``offset`` .. ``offset + limit`` newest first and
    the count of all; full-text conditions scan within ``bounds`` (``logs`` None: no log is
    read, and the scan says so by counting none)."""
    compiled = await with_error_runs(rows, compile_query(query, now_ms))
    scan = None
    if compiled.fulltext:
        scan = await _scan(rows, query, compiled, now_ms, bounds, logs)
    params = {**compiled.params, "limit": limit, "offset": offset}
    page = [RunRecord.from_row(r) for r in await rows.fetch_all(page_statement(compiled), params)]
    if offset == 0 and len(page) < limit:
        total = len(page)
    else:
        total = int((await rows.fetch_all(count_statement(compiled), compiled.params))[0][0])
    return RunSearch(query, page, total, scan)


async def _scan(
    rows: Rows,
    query: Query,
    compiled: Compiled,
    now_ms: int,
    bounds: ScanBounds,
    logs: LogSource | None,
) -> TextScan:
    narrowed = top_level_filter(query)
    window_of = await with_error_runs(rows, compile_query(narrowed or Query("", None), now_ms))
    listed = await rows.fetch_all(
        window_of.statement(
            "SELECT run_id FROM runs", "ORDER BY runs.created_at_ms DESC LIMIT :scan_limit"
        ),
        {**window_of.params, "scan_limit": bounds.runs},
    )
    window = [str(r[0]) for r in listed]
    eligible = len(window)
    if eligible >= bounds.runs:
        counted = await rows.fetch_all(count_statement(window_of), window_of.params)
        eligible = int(counted[0][0])
    window_json = json.dumps(window)
    found: dict[str, set[str]] = {term.param: set() for term in compiled.fulltext}
    for term in compiled.fulltext:
        kinds = ("prompt", "output") if term.field == "text" else (term.field,)
        for kind in kinds:
            for statement in _TEXT_SQL.get(kind, ()):
                hits = await rows.fetch_all(
                    statement, {"window": window_json, "needle": ascii_lower(term.needle)}
                )
                found[term.param].update(str(h[0]) for h in hits)
    wanted = [t for t in compiled.fulltext if t.field in ("text", "log")]
    read = left = files_left = 0
    if wanted and logs is not None:
        read, left, files_left = await _scan_logs(logs, window, wanted, found, bounds.log_bytes)
    for param, run_ids in found.items():
        compiled.params[param] = json.dumps(sorted(run_ids))
    searched = tuple(
        f"{field}s" for field in ("prompt", "output", "log")
        if any(t.field in (field, "text") for t in compiled.fulltext)
    )
    return TextScan(len(window), eligible, read, left, files_left, searched)


async def _scan_logs(
    logs: LogSource,
    window: Sequence[str],
    terms: Sequence[Any],
    found: dict[str, set[str]],
    budget: int,
) -> tuple[int, int, int]:
    """Read the window's logs newest run first until ``budget`` bytes are read; each term
    whose needle a log holds gets the run. Returns (bytes read, bytes left, files left)."""
    needles = {t.param: ascii_lower(t.needle).encode() for t in terms}
    read = left = files_left = 0
    for run_id in window:
        for path, size in await logs.files(run_id):
            if read >= budget:
                left += size
                files_left += 1
                continue
            todo = {p for p in needles if run_id not in found[p]}
            if not todo:
                continue
            allowed = min(size, budget - read)
            hit = await _find_in_log(logs, path, allowed, {p: needles[p] for p in todo})
            read += allowed
            if allowed < size:
                left += size - allowed
                files_left += 1
            for param in hit:
                found[param].add(run_id)
    return read, left, files_left


async def _find_in_log(
    logs: LogSource, path: str, size: int, needles: dict[str, bytes]
) -> set[str]:
    """The terms whose needles occur in the first ``size`` bytes of a log (ASCII-lowered,
    read in chunks that overlap by the longest needle so a match across chunks is found)."""
    overlap = max(len(n) for n in needles.values()) - 1
    hit: set[str] = set()
    offset, carry = 0, b""
    while offset < size and len(hit) < len(needles):
        chunk = await logs.read(path, offset, min(READ_CHUNK, size - offset))
        if not chunk:
            break
        offset += len(chunk)
        text = (carry + chunk).lower()
        hit.update(p for p, needle in needles.items() if needle in text)
        carry = text[-overlap:] if overlap > 0 else b""
    return hit
