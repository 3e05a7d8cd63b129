"""Term-index snapshots: one bank's postings saved to a file, so that a fresh process (a
one-shot ``tether notes search``, the first recall of a ``tether run``) maps them instead of
reading and tokenising every note of the bank again.

Where: ``<workspace>/index/terms-<hash>.snap``, the hash a fixed-length digest of the bank's name
(the folder 0700, files 0600). SQLite workspaces only: on PostgreSQL a note's number is handed
out when it is inserted, not when it commits, so "every note up to number N" is not a fact a
snapshot could record (see docs/design-notes.md).

A snapshot records what it reflects: every note of the bank up to the database's largest note
rowid at the time (``rowid_mark``) and every liveness change up to a ``note_changes`` sequence
(``change_mark``), with the ids of a few of those notes (``fingerprint``). A reader trusts
nothing blindly. The file must have the magic and this format's version, the tokenizer version
(:data:`store.search_policy.INDEX_TERMS_VERSION`), the bank's name, intact checksums (CRC-32 of
the header and of every array) and consistent shapes; and the database must still hold those
notes under those rowids, hold the change log without a gap after the mark, and not be behind
the snapshot (a restored backup). Anything else: the snapshot is ignored and the bank rebuilt.

Writers write a temporary file in the same folder, then rename it over the old one: a reader
sees a whole old file or a whole new one, and when two processes write at once the last rename
wins (both files are whole and both valid). Files are never changed in place, so a memory map
stays valid after the file is replaced.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from store.search_policy import INDEX_TERMS_VERSION

FOLDER = "index"
MAGIC = b"TETHER-TERMS\x00\x00\x00\x00"
# 2: the delta segment is saved as it is (not merged first); empty arrays take no room.
FORMAT_VERSION = 2
_PREAMBLE = struct.Struct("<16sIII4x")  # magic, format version, header bytes, header CRC
ALIGN = 64
# Arrays a snapshot may hold, and the only dtypes accepted for them.
DTYPES = {"<i8", "<i4", "<i2", "<u2", "|i1", "|b1", "<f4", "|u1"}
# Temporary files older than this are left-overs of a writer that died: removed when writing.
STALE_TEMP_S = 3600

# When to write: a bank built from scratch of at least this many notes...
SNAPSHOT_MIN_NOTES = 500
# ...and again once this many notes or decisions arrived since (or this share of the bank).
SNAPSHOT_TAIL_NOTES = 500
SNAPSHOT_TAIL_SHARE = 200


class SnapshotRejected(Exception):
    """A snapshot that must not be used; the message says why."""


@dataclass
class Snapshot:
    """A validated snapshot: its header fields and its arrays (views of the memory map)."""

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]


def snapshot_path(root: Path, namespace: str) -> Path:
    """The snapshot file of one bank (``namespace``) in the workspace folder ``root``."""
    # Two 32-bit checksums of the name: a fixed-length file name for any bank name (and no
    # hashlib to import on a one-shot search's path). A clash would only make two banks
    # replace each other's snapshot: the name inside is checked on every read.
    name = namespace.encode()
    return root / FOLDER / f"terms-{zlib.crc32(name):08x}{zlib.adler32(name):08x}.snap"


def snapshot_due(size: int, tail: int) -> bool:
    """Whether a bank of ``size`` notes that took in ``tail`` notes and decisions since its
    snapshot should write a new one (a fresh process re-reads that tail: keep it short)."""
    return tail >= max(SNAPSHOT_TAIL_NOTES, size // SNAPSHOT_TAIL_SHARE)


def fingerprint_docs(size: int, count: int = 8) -> list[int]:
    """Positions of the notes whose ids a snapshot records: spread over the bank, first and
    last included."""
    if size <= 0:
        return []
    return sorted({round(i * (size - 1) / max(1, count - 1)) for i in range(count)})


def mismatch(
    meta: Mapping[str, Any],
    *,
    max_rowid: int,
    max_change: int,
    ids: Mapping[int, str],
    change_row: int | None,
    first_change_after: int | None,
) -> str | None:
    """Why a snapshot does not describe this database (None: it does).

    ``max_rowid``/``max_change``: the database's largest note rowid and change sequence now;
    ``ids``: the ids the database holds at the snapshot's fingerprint rowids; ``change_row``:
    the note rowid logged at the snapshot's change mark (None: no such row);
    ``first_change_after``: the smallest logged sequence after the mark (None: none).
    """
    if meta["rowid_mark"] > max_rowid or meta["change_mark"] > max_change:
        return "it is newer than the database (a restored backup?)"
    for rowid, note_id in meta["fingerprint"]:
        if ids.get(rowid) != note_id:
            return f"the database holds another note at rowid {rowid}"
    mark = meta["change_mark"]
    logged = meta["change_fingerprint"]
    if logged is not None and change_row is not None and change_row != logged:
        return "the change log differs from the one it was made from"
    if max_change > mark and first_change_after != mark + 1:
        return "the change log was pruned past it"
    return None


# -- writing ---------------------------------------------------------------------------------


def write_snapshot(path: Path, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> int:
    """Write a snapshot atomically (temporary file in the same folder, then rename); returns
    its size in bytes.

    Raises:
        OSError: the folder cannot be created or written (a read-only workspace).
    """
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _remove_stale_temporaries(folder)
    entries: list[dict[str, Any]] = []
    chunks: list[tuple[int, memoryview]] = []
    offset = 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array)
        if data.dtype.str not in DTYPES and data.dtype.kind != "S":
            raise ValueError(f"unsupported dtype {data.dtype.str} for {name}")
        raw = data.reshape(-1).view(np.uint8).data
        entries.append({
            "name": name, "dtype": data.dtype.str, "shape": list(data.shape),
            "offset": offset if data.nbytes else 0, "bytes": data.nbytes,
            "crc": zlib.crc32(raw),
        })
        # An empty array takes no room: offset 0, nothing written (placed after the last
        # array, it would point past the end of the file).
        if data.nbytes:
            chunks.append((offset, raw))
            offset = _aligned(offset + data.nbytes)
    header = json.dumps({**meta, "arrays": entries}, separators=(",", ":")).encode()
    preamble = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(header), zlib.crc32(header))
    start = _aligned(_PREAMBLE.size + len(header))
    import tempfile  # only writers need it (a few ms of a one-shot search's start-up)

    descriptor, temporary = tempfile.mkstemp(prefix=".terms-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(preamble)
            handle.write(header)
            position = _PREAMBLE.size + len(header)
            for chunk_offset, raw in chunks:
                target = start + chunk_offset
                handle.write(b"\0" * (target - position))
                handle.write(raw)
                position = target + raw.nbytes
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return position


def _aligned(offset: int) -> int:
    return (offset + ALIGN - 1) // ALIGN * ALIGN


def _remove_stale_temporaries(folder: Path) -> None:
    cutoff = time.time() - STALE_TEMP_S
    for entry in folder.glob(".terms-*.tmp"):
        with contextlib.suppress(OSError):
            if entry.stat().st_mtime < cutoff:
                entry.unlink()


# -- reading ---------------------------------------------------------------------------------


def read_snapshot(path: Path, namespace: str) -> Snapshot:
    """Map a snapshot and check the file itself (not yet the database: see :func:`mismatch`).

    Raises:
        FileNotFoundError: there is none.
        SnapshotRejected: it is damaged, truncated, foreign, of another format or tokenizer, or
            of another bank.
    """
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < _PREAMBLE.size:
            raise SnapshotRejected("it is truncated")
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    magic, version, header_bytes, header_crc = _PREAMBLE.unpack_from(mapped, 0)
    if magic != MAGIC:
        raise SnapshotRejected("it is not a Tether term-index snapshot")
    if version != FORMAT_VERSION:
        raise SnapshotRejected(f"it has format {version}, this Tether reads {FORMAT_VERSION}")
    if _PREAMBLE.size + header_bytes > size:
        raise SnapshotRejected("it is truncated")
    header = mapped[_PREAMBLE.size:_PREAMBLE.size + header_bytes]
    if zlib.crc32(header) != header_crc:
        raise SnapshotRejected("its header is damaged")
    try:
        meta = json.loads(header)
    except ValueError as error:
        raise SnapshotRejected("its header is damaged") from error
    _check_meta(meta, namespace)
    start = _aligned(_PREAMBLE.size + header_bytes)
    arrays: dict[str, np.ndarray] = {}
    for entry in meta["arrays"]:
        arrays[entry["name"]] = _array(mapped, start, size, entry)
    return Snapshot(meta, arrays)


def _check_meta(meta: Any, namespace: str) -> None:
    if not isinstance(meta, dict):
        raise SnapshotRejected("its header is damaged")
    if meta.get("namespace") != namespace:
        raise SnapshotRejected("it belongs to another bank")
    if meta.get("terms_version") != INDEX_TERMS_VERSION:
        raise SnapshotRejected("it was made with another tokenizer")
    integers = ("rowid_mark", "change_mark")
    if not all(isinstance(meta.get(k), int) and meta[k] >= 0 for k in integers):
        raise SnapshotRejected("its header is damaged")
    fingerprint = meta.get("fingerprint")
    if not isinstance(fingerprint, list) or not all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and isinstance(p[1], str)
        for p in fingerprint
    ):
        raise SnapshotRejected("its header is damaged")
    if not (meta.get("change_fingerprint") is None or isinstance(meta["change_fingerprint"], int)):
        raise SnapshotRejected("its header is damaged")
    if not isinstance(meta.get("arrays"), list):
        raise SnapshotRejected("its header is damaged")


def _array(mapped: mmap.mmap, start: int, size: int, entry: Any) -> np.ndarray:
    try:
        dtype = np.dtype(entry["dtype"])
        shape = tuple(int(n) for n in entry["shape"])
        offset, length, crc = int(entry["offset"]), int(entry["bytes"]), int(entry["crc"])
    except (KeyError, TypeError, ValueError) as error:
        raise SnapshotRejected("its header is damaged") from error
    if (entry["dtype"] not in DTYPES and dtype.kind != "S") or any(n < 0 for n in shape):
        raise SnapshotRejected("its header is damaged")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if count * dtype.itemsize != length or offset < 0:
        raise SnapshotRejected("it is truncated or damaged")
    if length == 0:  # written at offset 0 and not at all (the file may end before ``start``)
        if offset != 0 or crc != zlib.crc32(b""):
            raise SnapshotRejected("its header is damaged")
        return np.zeros(shape, dtype=dtype)
    if start + offset + length > size:
        raise SnapshotRejected("it is truncated or damaged")
    view = memoryview(mapped)[start + offset:start + offset + length]
    if zlib.crc32(view) != crc:
        raise SnapshotRejected(f"its {entry.get('name')} array is damaged")
    return np.frombuffer(mapped, dtype=dtype, count=count, offset=start + offset).reshape(shape)
