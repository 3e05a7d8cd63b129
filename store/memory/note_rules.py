"""What a note must be before it is written, and the filters a note read takes: pure
checks, tested directly."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from store.errors import ConflictError, InvalidInputError, NotFoundError
from store.memory import memory_sql as sql
from store.memory.namespaces import (
    NAMESPACE_KINDS,
    Namespace,
    canonical_namespace,
    ensure_clean_text,
    ensure_length,
)
from store.memory.note_values import (
    MAX_BODY_BYTES,
    MAX_LABEL_CHARS,
    MAX_REASON_CHARS,
    MAX_TAGS,
    Note,
    NoteInput,
    NoteStatus,
    StatusFilter,
)
from store.model.ids import random_hex
from store.model.secret_mask import process_mask
from store.model.states import NOTE_STATUSES


def validate_status(status: str) -> NoteStatus:
    """Return ``status`` if it is pending, accepted or rejected; else raise InvalidInputError."""
    if status not in NOTE_STATUSES:
        raise InvalidInputError(
            f"Unknown note status {status!r}; use pending, accepted or rejected."
        )
    return status  # type: ignore[return-value]


def status_list(status: StatusFilter) -> list[str] | None:
    """The statuses a filter admits, or None for ``"any"``."""
    if status == "any":
        return None
    statuses = [status] if isinstance(status, str) else list(status)
    return [validate_status(value) for value in statuses]


def validate_body(body: str) -> str:
    """Return ``body`` if it is non-empty, clean text within the size limit, with secrets
    masked (:mod:`store.model.secret_mask`): a note reaches every future prompt and every
    teammate, never a password an agent saw."""
    ensure_clean_text(body, "the note body", allow="\t\n\r")
    if not body.strip():
        raise InvalidInputError("The note body is empty.")
    size = len(body.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise InvalidInputError(
            f"The note body is {size} bytes; a note holds at most {MAX_BODY_BYTES} bytes."
        )
    return process_mask().mask(body)


def validate_label(value: str, what: str) -> str:
    """A short one-line label (note id, kind, author, tag)."""
    ensure_clean_text(value, what)
    if not value.strip():
        raise InvalidInputError(f"{what[:1].upper()}{what[1:]} is empty.")
    ensure_length(value, what, MAX_LABEL_CHARS)
    return value


def validate_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Distinct tags in the order given, at most :data:`MAX_TAGS`."""
    distinct: list[str] = []
    for tag in tags:
        if validate_label(tag, "a tag") not in distinct:
            distinct.append(tag)
    if len(distinct) > MAX_TAGS:
        raise InvalidInputError(f"A note has {len(distinct)} tags; the limit is {MAX_TAGS}.")
    return tuple(distinct)


def validate_supersedes(note_id: str, supersedes: Iterable[str]) -> tuple[str, ...]:
    """Distinct target ids, refusing a note that supersedes itself."""
    targets: list[str] = []
    for target in supersedes:
        validate_label(target, "a superseded note id")
        if target == note_id:
            raise InvalidInputError(f"Note {note_id!r} cannot supersede itself.")
        if target not in targets:
            targets.append(target)
    return tuple(sorted(targets))


def check_targets(
    namespace: str, targets: Sequence[str], found: dict[str, str]
) -> None:
    """Refuse targets that do not exist or live in another namespace (``found``: id -> ns)."""
    for target in targets:
        if target not in found:
            raise NotFoundError(f"There is no note with id {target!r} to supersede.")
        if found[target] != namespace:
            raise InvalidInputError(
                f"Note {target!r} is in namespace {found[target]!r}; a note can only "
                f"supersede notes of its own namespace ({namespace!r})."
            )


def supersession_cycle(edges: Iterable[tuple[str, str]]) -> list[str] | None:
    """A circle of supersession among ``edges`` (``(note, target)`` pairs) as the ids along it,
    first id repeated at the end (``["n1", "n2", "n1"]``), or None when there is none.

    A circle would hide every note on it from every default read (each is superseded by an
    accepted note), so no writer may close one, whatever its length. Only a batch can: an edge
    points at a note that already exists (a foreign key on both backends) and notes are
    append-only, so a single new note is never on a circle."""
    targets: dict[str, list[str]] = {}
    for note, target in edges:
        targets.setdefault(note, []).append(target)
    done: set[str] = set()
    for start in sorted(targets):
        if start in done:
            continue
        # Iterative depth-first walk: a chain of any length never meets the recursion limit.
        path: list[str] = [start]
        on_path = {start}
        pending = [iter(sorted(targets.get(start, ())))]
        while pending:
            following = next(pending[-1], None)
            if following is None:
                pending.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
                continue
            if following in on_path:
                return [*path[path.index(following):], following]
            if following in done:
                continue
            path.append(following)
            on_path.add(following)
            pending.append(iter(sorted(targets.get(following, ()))))
    return None


def refuse_cycle(cycle: Sequence[str] | None) -> None:
    """Raise the one sentence for a supersession circle (see :func:`supersession_cycle`)."""
    if cycle:
        chain = " -> ".join(repr(note) for note in cycle)
        raise InvalidInputError(
            f"These notes would supersede each other in a circle ({chain}), which would hide "
            "all of them; nothing was written."
        )


def namespace_kind_range(kind: str) -> tuple[str, str]:
    """The ``[low, high)`` text range of namespaces of one kind (``kind:`` .. ``kind;``)."""
    if kind not in NAMESPACE_KINDS:
        raise InvalidInputError(
            f"Unknown namespace kind {kind!r}; use workflow, agent, user or global."
        )
    return f"{kind}:", f"{kind};"



def filter_params(
    namespace: str | Namespace | None,
    namespace_kind: str | None,
    status: StatusFilter,
    include_superseded: bool,
    kind: str | None,
) -> tuple[str, dict[str, Any]]:
    """The WHERE clause and parameters of a note read (see ``note_filter``)."""
    statuses = status_list(status)
    params: dict[str, Any] = {}
    if namespace is not None:
        params["namespace"] = canonical_namespace(namespace)
    if namespace_kind is not None:
        params["namespace_low"], params["namespace_high"] = namespace_kind_range(namespace_kind)
    one_status = statuses is not None and len(statuses) == 1
    if statuses is not None:
        if one_status:
            params["status"] = statuses[0]
        else:
            params["statuses"] = json.dumps(statuses)
    if kind is not None:
        params["kind"] = kind
    where = sql.note_filter(
        namespace=namespace is not None,
        namespace_kind=namespace_kind is not None,
        statuses=statuses is not None and not one_status,
        status=one_status,
        include_superseded=include_superseded,
        kind=kind is not None,
    )
    return where, params


def validate_reason(reason: str) -> str:
    """The reason given with a decision, checked (clean text, bounded)."""
    ensure_clean_text(reason, "the reason", allow="\t\n\r")
    ensure_length(reason, "the reason", MAX_REASON_CHARS)
    return reason


def check_same_note(
    stored: Note,
    stored_targets: tuple[str, ...],
    params: dict[str, Any],
    tags: tuple[str, ...],
    targets: tuple[str, ...],
) -> None:
    """Refuse re-saving an existing id with different content (notes never change)."""
    wanted = (params["namespace"], params["body"], params["kind"], tags, params["author"],
              params["run_id"], params["node_id"], params["iteration"], targets)
    have = (stored.namespace, stored.body, stored.kind, stored.tags, stored.author,
            stored.run_id, stored.node_id, stored.iteration, stored_targets)
    if wanted != have:
        raise ConflictError(
            f"Note {stored.id!r} already exists with different content; notes never change, "
            "so save the new version under a new id that supersedes it."
        )


def note_params(note: NoteInput) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Validate one batch entry: the INSERT parameters (with a fresh id when none is given)
    and its supersession targets. Raises InvalidInputError with one sentence."""
    note_id = validate_label(note.id, "the note id") if note.id else random_hex(16)
    tags = validate_tags(note.tags)
    created = note.created_at_ms
    if created is not None and (isinstance(created, bool) or not isinstance(created, int)
                                or created < 0):
        raise InvalidInputError("created_at_ms must be a whole number of milliseconds.")
    params: dict[str, Any] = {
        "id": note_id,
        "namespace": canonical_namespace(note.namespace),
        "body": validate_body(note.body),
        "kind": None if note.kind is None else validate_label(note.kind, "the note kind"),
        "tags_json": json.dumps(list(tags), ensure_ascii=False) if tags else None,
        "author": None if note.author is None else validate_label(note.author, "the note author"),
        "status": validate_status(note.status),
        "run_id": None,
        "node_id": None,
        "iteration": None,
        "created_at_ms": created,
    }
    return params, validate_supersedes(note_id, note.supersedes)
