"""Codex's model requests, one by one, from its session rollout file.

``codex exec --json`` reports usage only at the end of a turn, as the thread's running total
over every model request so far (codex-rs ``event_processor_with_jsonl_output.rs`` emits
``last_total_token_usage``; openai/codex#17539): a 28-request turn of a 258k-window model is
one 1.77M-token figure. Codex also writes each session to a rollout file,
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl`` (``CODEX_HOME``
defaults to ``~/.codex``; current versions may compress finished ones to ``.jsonl.zst``, and
readers prefer the plain file, codex-rs ``rollout/src/compression.rs``). Each line is
``{"timestamp", "type", "payload"}``; ``turn_context`` names the model of the next request and
an ``event_msg`` of type ``token_count`` carries ``info.total_token_usage`` (the running
total), ``info.last_token_usage`` and ``info.model_context_window`` after each request.

:class:`RequestCounter` turns those lines into one usage per model request, from the growth of
``total_token_usage`` (never by summing ``last_token_usage``): Codex writes each count twice
(identical totals a moment apart), writes rate-limit-only counts (``"info": null``) and
synthetic ones (``fill_to_context_window`` sets a total with no input/output split), all of
which add nothing here. :class:`RolloutFile` reads a rollout as it grows (complete lines only);
:func:`find_rollout` locates it by thread id. The Codex preset (:mod:`engine.agents.cli.codex`)
decides what to do when there is none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from engine.agents.reported_usage import token_count
from store.model.token_lanes import TokenUsage

SOURCE = "Codex"
RAW_LANES = (
    "input_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
)
MAX_ROLLOUT_BYTES = 512 * 1024 * 1024
"""A rollout larger than this is not read (one session's file is megabytes, not gigabytes)."""


def codex_usage(usage: Any, source: str = SOURCE) -> TokenUsage:
    """A Codex usage object (``turn.completed.usage``, or a rollout count) as lanes.

    ``input_tokens`` *includes* ``cached_input_tokens`` (and ``cache_write_input_tokens`` when
    reported), so fresh input is the difference; ``output_tokens`` *includes*
    ``reasoning_output_tokens``, so the output lane is the difference: nothing counts twice.
    """
    total_input = token_count(usage, "input_tokens", source)
    cached = token_count(usage, "cached_input_tokens", source)
    written = token_count(usage, "cache_write_input_tokens", source)
    output = token_count(usage, "output_tokens", source)
    reasoning = min(output, token_count(usage, "reasoning_output_tokens", source))
    return TokenUsage(
        input=max(0, total_input - cached - written),
        cache_read=cached,
        cache_write=written,
        output=output - reasoning,
        reasoning=reasoning,
    )


def raw_counts(usage: Any) -> dict[str, int]:
    """The raw Codex lanes of a usage object (absent ones 0), validated."""
    return {lane: token_count(usage, lane, f"{SOURCE}'s rollout") for lane in RAW_LANES}


def timestamp_ms(text: Any) -> int | None:
    """A rollout line's ISO timestamp (``2026-02-23T11:41:32.239Z``) in epoch ms, or None."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True)
class RequestUsage:
    """One model request as the rollout recorded it."""

    usage: TokenUsage
    raw: dict[str, int]
    """The request's own raw counts (growth of the running total)."""
    model: str | None
    context_window: int | None
    started_ms: int | None
    finished_ms: int | None


class RequestCounter:
    """Rollout lines in, one :class:`RequestUsage` per model request out (pure; see the module
    docstring). ``floor`` is a running total already accounted for (the thread's usage before
    this invocation resumed it, or turns already recorded as a whole): growth up to it is not
    a request of this invocation."""

    def __init__(self, floor: Mapping[str, int] | None = None) -> None:
        self.total: dict[str, int] = dict(floor or dict.fromkeys(RAW_LANES, 0))
        self.model: str | None = None
        self.context_start_ms: int | None = None
        self.requests = 0
        self.skipped = 0
        """Counts that added nothing: duplicates, rate-limit-only and synthetic ones."""
        self.shrunk = 0
        """Counts below the total already reached (an earlier invocation's, or recomputed by
        Codex): skipped, so nothing is counted twice (the turn totals catch any shortfall)."""

    def raise_floor(self, floor: Mapping[str, int]) -> None:
        """Account for usage recorded some other way (a turn taken whole): lanes only grow."""
        self.total = {lane: max(self.total.get(lane, 0), floor.get(lane, 0)) for lane in RAW_LANES}

    def feed(self, record: Any) -> RequestUsage | None:
        """Take one parsed rollout line; the request it completes, if any."""
        if not isinstance(record, dict):
            return None
        payload = record.get("payload")
        if not isinstance(payload, dict):
            return None
        kind = record.get("type")
        at_ms = timestamp_ms(record.get("timestamp"))
        if kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model:
                self.model = model
            self.context_start_ms = at_ms
            return None
        if kind != "event_msg" or payload.get("type") != "token_count":
            return None
        info = payload.get("info")
        if not isinstance(info, dict) or not isinstance(info.get("total_token_usage"), dict):
            self.skipped += 1  # rate limits only
            return None
        total = raw_counts(info["total_token_usage"])
        if not total["input_tokens"] and not total["output_tokens"]:
            self.skipped += 1  # synthetic (fill_to_context_window): no request behind it
            return None
        growth = {lane: total[lane] - self.total.get(lane, 0) for lane in RAW_LANES}
        if any(value < 0 for value in growth.values()):
            self.shrunk += 1
            return None
        if not growth["input_tokens"] and not growth["output_tokens"]:
            self.skipped += 1  # the same count again, or usage already accounted for
            return None
        self.total = total
        self.requests += 1
        window = info.get("model_context_window")
        return RequestUsage(
            usage=codex_usage(growth, f"{SOURCE}'s rollout"),
            raw=growth,
            model=self.model,
            context_window=window if isinstance(window, int) and window > 0 else None,
            started_ms=self.context_start_ms,
            finished_ms=at_ms,
        )


class RolloutFile:
    """A rollout file read as it grows: each call returns the complete lines added since the
    last (a compressed ``.zst`` file is read whole, once: Codex compresses finished ones)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""
        self._done = False

    def new_lines(self) -> list[str]:
        """The lines written since the last call (the last line only once it is complete).

        When Codex compresses the plain file while it is being read (it keeps one of the two),
        the compressed one is read whole: lines already counted add nothing the second time
        (:class:`RequestCounter` only counts growth)."""
        if self._done:
            return []
        if self.path.suffix == ".zst":
            self._done = True
            return _decompressed(self.path).decode("utf-8", errors="replace").splitlines()
        if not self.path.exists() and self.path.with_name(self.path.name + ".zst").exists():
            self.path = self.path.with_name(self.path.name + ".zst")
            self._partial = b""
            return self.new_lines()
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read(max(0, MAX_ROLLOUT_BYTES - self.offset))
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [line.decode("utf-8", errors="replace") for line in lines if line.strip()]

    def rest(self) -> list[str]:
        """Every remaining line, the last one even without its newline (the writer is gone)."""
        lines = self.new_lines()
        if self._partial.strip():
            lines.append(self._partial.decode("utf-8", errors="replace"))
        self._partial = b""
        return lines


def _decompressed(path: Path) -> bytes:
    import zstandard

    parts: list[bytes] = []
    size = 0
    with open(path, "rb") as handle, zstandard.ZstdDecompressor().stream_reader(handle) as reader:
        try:
            while chunk := reader.read(1 << 20):
                size += len(chunk)
                if size > MAX_ROLLOUT_BYTES:
                    raise OSError(f"{path} holds more than {MAX_ROLLOUT_BYTES:,} bytes")
                parts.append(chunk)
        except zstandard.ZstdError as error:
            raise OSError(f"{path} is not a valid zstd file: {error}") from error
    return b"".join(parts)


def parse_line(line: str) -> Any:
    """One rollout line as JSON (None for a line that is not)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def codex_home(env: Mapping[str, str]) -> Path:
    """Where Codex keeps its sessions: ``CODEX_HOME``, else ``~/.codex`` (``HOME`` from
    ``env``, the environment the agent runs in)."""
    home = env.get("CODEX_HOME")
    if home:
        return Path(home).expanduser()
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".codex"


def _day_folders(sessions: Path, around_s: float) -> Iterator[Path]:
    # The folder is the session's local start date: look at that day and its neighbours
    # (a session started before midnight, a clock in another zone).
    day = datetime.fromtimestamp(around_s)
    for offset in (0, -1, 1):
        moment = day + timedelta(days=offset)
        yield sessions / f"{moment:%Y}" / f"{moment:%m}" / f"{moment:%d}"


def find_rollout(home: Path, thread_id: str, around_s: float) -> Path | None:
    """The rollout file of ``thread_id`` (plain preferred over ``.zst``), or None.

    Looks in the dated folders around ``around_s`` first, then in every dated folder and in
    ``archived_sessions``; never follows the thread id outside ``home``.
    """
    if not thread_id or "/" in thread_id or "\\" in thread_id or thread_id.startswith("."):
        return None
    names = (f"-{thread_id}.jsonl", f"-{thread_id}.jsonl.zst")
    sessions = home / "sessions"

    def pick(folder: Path) -> Path | None:
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            return None
        for suffix in names:
            for entry in entries:
                if entry.startswith("rollout-") and entry.endswith(suffix):
                    return folder / entry
        return None

    for folder in _day_folders(sessions, around_s):
        found = pick(folder)
        if found is not None:
            return found
    for folder in sorted(sessions.glob("*/*/*"), reverse=True):
        found = pick(folder)
        if found is not None:
            return found
    return pick(home / "archived_sessions")


def last_total(path: Path) -> dict[str, int] | None:
    """The last running total a rollout holds (a resumed thread's usage before this
    invocation), or None when it holds none or cannot be read."""
    try:
        lines = RolloutFile(path).rest()
    except OSError:
        return None
    counter = RequestCounter()
    seen = False
    for line in lines:
        if counter.feed(parse_line(line)) is not None:
            seen = True
    return counter.total if seen else None
