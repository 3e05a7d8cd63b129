"""``tether notes``: list, add, accept, reject and search notes.

``list`` and ``search`` follow the store's default read contract (accepted notes that no
accepted note supersedes) unless widened with ``--status`` / ``--include-superseded``.
Statuses are coloured on a terminal (pending yellow, accepted green, rejected red).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

import click

from store.db.paging import MORE_COUNT_CAP
from store.errors import InvalidInputError, NotFoundError
from store.memory import memory_sql
from store.memory.namespaces import canonical_namespace, validate_namespace
from store.memory.note_rules import note_params, validate_label
from store.memory.note_values import (
    DEFAULT_SEARCH_LIMIT,
    MAX_SEARCH_LIMIT,
    Note,
    NoteInput,
    SearchHit,
)
from store.model.states import NOTE_STATUSES
from store.search.search_policy import MODE_ALL_WORDS, MODE_ANY_WORD, query_terms
from tui.cli.arguments import read_text_argument
from tui.cli.common import (
    limit_option,
    listing_format_option,
    run_async,
    run_direct,
    workspace_from,
    workspace_option,
)
from tui.cli.database_access import open_store, reading_store
from tui.cli.hot_commands import notes_add
from tui.cli.memory_commands import one_line, styled
from tui.cli.output import Page, more_line, page_of, print_listing
from tui.plain import ago

STATUS_COLOURS = {"pending": "yellow", "accepted": "green", "rejected": "red"}
BODY_WIDTH = 72
DEFAULT_NOTES_LIMIT = 100

Listed = tuple[Note, list[str], list[str]]


@click.group("notes")
def notes() -> None:
    """Notes: append-only knowledge that people accept or reject."""


@notes.command("list")
@click.argument("namespace", required=False)
@click.option(
    "--status",
    type=click.Choice([*NOTE_STATUSES, "any"]),
    default="accepted",
    show_default=True,
    help="Which statuses to show.",
)
@click.option(
    "--include-superseded", is_flag=True, help="Also show notes an accepted note supersedes."
)
@limit_option(DEFAULT_NOTES_LIMIT, "notes")
@workspace_option
@listing_format_option
@run_direct
async def list_command(
    namespace: str | None,
    status: str,
    include_superseded: bool,
    limit: int,
    workspace_dir: str | None,
    output_format: str,
) -> None:
    """Notes of every namespace, or of NAMESPACE, oldest first."""
    wanted = None if namespace is None else canonical_namespace(validate_namespace(namespace))
    workspace = workspace_from(workspace_dir)
    page = Page([], 0)
    now = 0
    async with reading_store(workspace) as store:
        if store is not None:
            now = store.now_ms()
            found = await store.list_notes(
                wanted, status=status, include_superseded=include_superseded, limit=limit
            )
            total = len(found)
            if total == limit:
                total = await store.count_notes(
                    wanted,
                    status=status,
                    include_superseded=include_superseded,
                    upto=limit + MORE_COUNT_CAP,
                )
            edges = await store.supersession_edges([note.id for note in found])
    if store is not None:
        targets_of: dict[str, list[str]] = defaultdict(list)
        superseders_of: dict[str, list[str]] = defaultdict(list)
        for edge in edges:
            targets_of[edge.note_id].append(edge.supersedes_id)
            superseders_of[edge.supersedes_id].append(f"{edge.note_id} ({edge.note_status})")
        listed = [(note, targets_of[note.id], superseders_of[note.id]) for note in found]
        page = page_of(listed, limit, total)
    print_listing(
        output_format,
        page,
        _listed_json,
        lambda rows: _print_listed(rows, now),
        empty="No notes.",
        more_text=lambda n: more_line(n, "notes", MORE_COUNT_CAP),
    )


def _listed_json(row: Listed) -> dict[str, object]:
    note, targets, superseders = row
    return {**note.to_json(), "supersedes": targets, "superseded_by": superseders}


def _print_listed(rows: Sequence[Listed], now: int) -> None:
    for note, targets, superseders in rows:
        _print_note(note, now)
        if targets:
            click.echo(f"    supersedes {', '.join(one_line(t, 40) for t in targets)}")
        if superseders:
            click.echo(f"    superseded by {', '.join(one_line(s, 60) for s in superseders)}")


def _status(status: str) -> str:
    return styled(status.ljust(8), fg=STATUS_COLOURS.get(status))


def _print_note(note: Note, now: int, prefix: str = "") -> None:
    tags = f"  [{', '.join(one_line(tag, 30) for tag in note.tags)}]" if note.tags else ""
    click.echo(
        f"{prefix}{styled(one_line(note.id, 40), fg='cyan')}  {_status(note.status)}  "
        f"{styled(one_line(note.namespace, 40), bold=True)}  "
        f"{styled(ago(now, note.created_at_ms), dim=True)}{tags}"
    )
    click.echo(f"    {one_line(note.body, BODY_WIDTH)}")


@notes.command("add")
@click.argument("namespace")
@click.argument("body")
@click.option(
    "--status",
    type=click.Choice(["pending", "accepted"]),
    default="accepted",
    show_default=True,
    help="pending proposes the note for review; accepted makes it live at once.",
)
@click.option(
    "--supersedes",
    "supersedes",
    multiple=True,
    metavar="ID",
    help="A note of the same namespace this one replaces (repeatable).",
)
@click.option("--tag", "tags", multiple=True, metavar="T", help="A label (repeatable).")
@click.option("--kind", default=None, metavar="K", help="A free-form label for the note.")
@workspace_option
@run_direct
async def add_command(
    namespace: str,
    body: str,
    status: str,
    supersedes: tuple[str, ...],
    tags: tuple[str, ...],
    kind: str | None,
    workspace_dir: str | None,
) -> None:
    """Append a note to NAMESPACE and print its id ('-' reads BODY from stdin, '@FILE' a file)."""
    await notes_add(
        workspace_from(workspace_dir),
        namespace,
        body,
        status=status,
        supersedes=supersedes,
        tags=tags,
        kind=kind,
    )


async def _decide(note_id: str, status: str, reason: str | None, workspace_dir: str | None) -> None:
    validate_label(note_id, "the note id")
    workspace = workspace_from(workspace_dir)
    if not workspace.exists():
        raise NotFoundError(f"There is no note with id {note_id!r}.")
    async with open_store(workspace, create=False) as store:
        before = await store.get_note(note_id)
        if before is not None and before.status == status and reason in (None,
                                                                         before.status_reason):
            # Deciding again changes nothing; saying "Accepted" again would claim a change.
            click.echo(f"Note {one_line(note_id, 40)} is already {status}; nothing changed.")
            return
        note = await store.set_note_status(note_id, status, reason=reason)
        targets = await store.supersedes(note.id)
    verb = "Accepted" if status == "accepted" else "Rejected"
    count = f"{len(targets)} note{'s' if len(targets) != 1 else ''}"
    effect = ""
    if targets:
        effect = f"; it retires {count}" if status == "accepted" else "; it retires nothing"
    click.echo(f"{verb} note {one_line(note.id, 40)}{effect}.")


@notes.command("accept")
@click.argument("note_id", metavar="ID")
@click.option("--reason", default=None, metavar="TEXT", help="Why (kept with the note).")
@workspace_option
@run_direct
async def accept_command(note_id: str, reason: str | None, workspace_dir: str | None) -> None:
    """Accept note ID: it becomes live and retires the notes it supersedes."""
    await _decide(note_id, "accepted", reason, workspace_dir)


@notes.command("reject")
@click.argument("note_id", metavar="ID")
@click.option("--reason", default=None, metavar="TEXT", help="Why (kept with the note).")
@workspace_option
@run_direct
async def reject_command(note_id: str, reason: str | None, workspace_dir: str | None) -> None:
    """Reject note ID: it is hidden, and the notes it supersedes stay (or become) live."""
    await _decide(note_id, "rejected", reason, workspace_dir)


@notes.command("search")
@click.argument("query")
@click.option("--namespace", default=None, metavar="NS", help="Only this namespace.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_SEARCH_LIMIT),
    default=DEFAULT_SEARCH_LIMIT,
    show_default=True,
    help="At most this many results.",
)
@workspace_option
@listing_format_option
@run_direct
async def search_command(
    query: str, namespace: str | None, limit: int, workspace_dir: str | None, output_format: str
) -> None:
    """Full-text search (BM25) over live notes: notes holding every word of QUERY first; when
    fewer than --limit do, the rest hold any of its words (stop words dropped), so a question
    typed as a sentence still finds its answer. The first line says which search answered."""
    query_terms(query)
    ns = None if namespace is None else validate_namespace(namespace)
    workspace = workspace_from(workspace_dir)
    page = Page([], 0)
    mode = MODE_ALL_WORDS
    now = 0
    async with reading_store(workspace) as store:
        if store is not None:
            # One hit more than asked says whether there are more; ranking every match only
            # to count them would cost a full search, so `more` is 1 (some) or 0 here.
            wanted = min(limit + 1, MAX_SEARCH_LIMIT)
            found = await store.search_notes_with_mode(query, namespace=ns, limit=wanted)
            page, mode = page_of(found.hits, limit), found.mode
            now = store.now_ms()
    print_listing(
        output_format,
        page,
        lambda hit: {
            "score": hit.score,
            "mode": hit.mode,
            "matched_terms": list(hit.matched),
            **hit.note.to_json(),
        },
        lambda hits: _print_hits(hits, mode, now),
        empty="No matching notes.",
        more_text=lambda _: "… more matching notes (raise --limit to see them)",
    )


def _print_hits(hits: Sequence[SearchHit], mode: str, now: int) -> None:
    count = f"{len(hits)} note{'s' if len(hits) != 1 else ''}"
    click.echo(styled(f"{count} ({search_mode_line(mode)})", dim=True))
    for hit in hits:
        _print_note(hit.note, now)
        click.echo(styled(f"    {hit.mode}: {', '.join(hit.matched)}", dim=True))


def search_mode_line(mode: str) -> str:
    """How a note search answered, in words for people."""
    if mode == MODE_ALL_WORDS:
        return "every word matched"
    if mode == MODE_ANY_WORD:
        return "no note holds every word; matched any word, common words left out"
    return "every word matched, then any word"


IMPORT_FIELDS = {"namespace", "body", "id", "kind", "tags", "author", "status", "supersedes",
                 "created_at_ms"}
MAX_REPORTED_ERRORS = 50


def content_id(namespace: str, body: str) -> str:
    """The id an imported note without one gets: made from its bank and text, so importing
    the same file again (or a line twice) adds nothing."""
    import hashlib

    try:
        bank = canonical_namespace(namespace)
    except InvalidInputError:
        bank = namespace  # reported by the namespace check that follows
    digest = hashlib.sha256(f"{bank}\x00{body}".encode()).hexdigest()
    return f"imported-{digest[:20]}"


def parse_import_line(number: int, line: str) -> NoteInput:
    """One line of a notes import as a validated NoteInput; InvalidInputError names the line."""
    def bad(reason: str) -> InvalidInputError:
        return InvalidInputError(f"Line {number}: {reason}")

    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise bad(f"not valid JSON ({error.msg} at column {error.colno}).") from None
    if not isinstance(record, dict):
        raise bad("expected a JSON object with at least namespace and body.")
    unknown = sorted(set(record) - IMPORT_FIELDS)
    if unknown:
        raise bad(f"unknown field {unknown[0]!r}; use {', '.join(sorted(IMPORT_FIELDS))}.")
    for field in ("namespace", "body"):
        if not isinstance(record.get(field), str):
            raise bad(f"{field} must be text.")
    for field in ("id", "kind", "author", "status"):
        if field in record and record[field] is not None and not isinstance(record[field], str):
            raise bad(f"{field} must be text.")
    for field in ("tags", "supersedes"):
        value = record.get(field, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(f"{field} must be a list of text.")
    note = NoteInput(
        namespace=record["namespace"], body=record["body"],
        id=record.get("id") or content_id(record["namespace"], record["body"]),
        kind=record.get("kind"), tags=tuple(record.get("tags", [])),
        author=record.get("author"), status=record.get("status") or "accepted",
        supersedes=tuple(record.get("supersedes", [])),
        created_at_ms=record.get("created_at_ms"),
    )
    try:
        validate_namespace(note.namespace)
        note_params(note)
    except InvalidInputError as error:
        raise bad(str(error)[:1].lower() + str(error)[1:]) from None
    return note


@notes.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@workspace_option
@run_async
async def import_command(file: str, workspace_dir: str | None) -> None:
    """Add the notes of FILE, one JSON object per line ('-' reads stdin): namespace and body,
    optionally id, status, tags, kind, author, supersedes and created_at_ms. All or nothing:
    every bad line is reported with its number and nothing is written."""
    text = read_text_argument("-" if file == "-" else f"@{file}", "the import file")
    inputs: list[NoteInput] = []
    errors: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            inputs.append(parse_import_line(number, line))
        except InvalidInputError as error:
            errors.append(str(error))
    if errors:
        for message in errors[:MAX_REPORTED_ERRORS]:
            click.echo(message, err=True)
        more = len(errors) - MAX_REPORTED_ERRORS
        if more > 0:
            click.echo(f"... and {more} more bad lines.", err=True)
        click.echo(f"Nothing was imported: {len(errors)} bad line"
                   f"{'s' if len(errors) != 1 else ''}.", err=True)
        raise SystemExit(2)
    unique = list({note.id: note for note in reversed(inputs)}.values())[::-1]
    repeated = len(inputs) - len(unique)
    workspace = workspace_from(workspace_dir)
    async with open_store(workspace, create=True) as store:
        there = await store.db.fetch_all(
            memory_sql.EXISTING_NOTE_IDS, {"ids": json.dumps([n.id for n in unique])}
        )
        ids = await store.save_notes(unique)
    kept = len(there)
    added = len(ids) - kept
    line = f"Imported {added} note{'s' if added != 1 else ''}"
    skipped = [f"{kept} already in the workspace" if kept else "",
               f"{repeated} repeated in the file" if repeated else ""]
    skipped = [part for part in skipped if part]
    click.echo(line + (f" ({'; '.join(skipped)}: kept once)." if skipped else "."))
    from tui.cli.background import embed_in_background  # only after a write: start-up

    embed_in_background(workspace)


COMMANDS = [notes]
