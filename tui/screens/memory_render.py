"""Pure helpers that turn facts and notes into the Memory view's rows and panels.

Nothing here touches the database or Textual widgets, so ordering, grouping and the wording of
provenance ("why is this remembered") are tested directly. Every stored string reaches the
screen through :func:`tui.format.literal` / :func:`tui.format.one_line` (never as markup).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from store.memory.facts import Fact
from store.memory.note_values import Note
from tui.format import ago, duration, literal, one_line, pretty_json
from tui.screens.note_text import readable_body, readable_text
from tui.widgets.filter_bar import matches

Cells = Sequence[Text]
ROW_SEP = "\x1f"
"""Separates the parts of a row key (a unit separator never appears in validated text)."""

NOTE_STYLES = {
    "pending": "bold yellow",
    "accepted": "green",
    "retired": "dim",
    "rejected": "dim red",
}
NOTE_GLYPHS = {"pending": "?", "accepted": "✓", "retired": "⇣", "rejected": "✗"}


def clock_time(ms: int | None) -> str:
    """An absolute UTC time, e.g. ``2026-01-01 00:00:05Z`` (stable across time zones)."""
    if ms is None:
        return "–"
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ms / 1000))


def coarse_age(now_ms: int, then_ms: int) -> str:
    """How long ago, to the minute ("<1m ago", "5m ago", "3h ago", "2d ago").

    List cells use this rather than a seconds-precise age, so a list of thousands of rows does
    not rewrite every cell every second; the inspector shows the exact time.
    """
    minutes = max(0, now_ms - then_ms) // 60_000
    if minutes < 1:
        return "<1m ago"
    if minutes < 60:
        return f"{minutes}m ago"
    if minutes < 24 * 60:
        return f"{minutes // 60}h ago"
    return f"{minutes // (24 * 60)}d ago"


# -- facts -----------------------------------------------------------------------------------


def namespace_row_key(namespace: str) -> str:
    """Row key of a namespace heading in the facts table."""
    return f"ns{ROW_SEP}{namespace}"


def fact_row_key(namespace: str, key: str) -> str:
    """Row key of one fact in the facts table."""
    return f"fact{ROW_SEP}{namespace}{ROW_SEP}{key}"


def parse_row_key(row_key: str | None) -> tuple[str, ...]:
    """Split a row key back into its parts: ``("ns", namespace)`` or ``("fact", ns, key)``."""
    return tuple(row_key.split(ROW_SEP)) if row_key else ()


def ttl_text(fact: Fact, now_ms: int) -> Text:
    """Remaining lifetime: ``–`` when permanent; to the minute while more than a minute is
    left (``4m``), to the second in the last minute (``42.0s``, highlighted)."""
    remaining = fact.ttl_remaining_ms(now_ms)
    if remaining is None:
        return Text("–", style="dim")
    if remaining < 60_000:
        return Text(duration(remaining), style="yellow")
    return Text(duration(remaining // 60_000 * 60_000).replace("m00s", "m"))


def writer_text(
    run_id: str | None, node_id: str | None, iteration: int | None, *, short: bool = False
) -> Text:
    """Who wrote it last: ``run/node#iteration``, or a person when no run did (the store
    records the run of an engine write and nothing for the dashboard or the command line)."""
    if run_id is None:
        return Text("person" if short else "a person (dashboard or CLI)", style="dim")
    text = literal(run_id, keep_newlines=False)
    if node_id is not None:
        text.append("/")
        text.append_text(literal(node_id, keep_newlines=False))
        if iteration:
            text.append(f"#{iteration}")
    return text


def fact_matches(fact: Fact, needle: str) -> bool:
    """The ``/`` filter over namespace, key and value text."""
    return matches(needle, fact.namespace, fact.key, fact.value_json)


def fact_rows(
    facts: Iterable[Fact], needle: str, now_ms: int, value_width: int = 40
) -> list[tuple[str, Cells]]:
    """Facts grouped under one heading row per namespace (facts arrive ordered by namespace)."""
    groups: dict[str, list[Fact]] = {}
    for fact in facts:
        if fact_matches(fact, needle):
            groups.setdefault(fact.namespace, []).append(fact)
    rows: list[tuple[str, Cells]] = []
    for namespace, members in groups.items():
        count = f"{len(members)} fact" + ("" if len(members) == 1 else "s")
        rows.append((
            namespace_row_key(namespace),
            [
                one_line(namespace, "bold"),
                Text(count, style="dim"),
                Text(""),
                Text(""),
                Text(""),
            ],
        ))
        for index, fact in enumerate(members):
            rows.append((
                fact_row_key(fact.namespace, fact.key),
                _fact_cells(fact, index == len(members) - 1, _cell_clock(fact, now_ms),
                            value_width),
            ))
    return rows


def _cell_clock(fact: Fact, now_ms: int) -> int:
    """The time a fact's cells depend on: only the minute for a permanent fact (its age), the
    exact time for one with a TTL. Unchanged permanent facts are then rebuilt from the cache
    below instead of being formatted again on every refresh."""
    if fact.expires_at_ms is not None:
        return now_ms
    return now_ms // 60_000 * 60_000


@functools.lru_cache(maxsize=8192)
def _fact_cells(fact: Fact, last: bool, now_ms: int, value_width: int) -> tuple[Text, ...]:
    guide = "└ " if last else "├ "
    return (
        Text(guide, style="dim") + one_line(fact.key, width=28),
        one_line(fact.value_json, width=value_width),
        ttl_text(fact, now_ms),
        Text(coarse_age(now_ms, fact.updated_at_ms), style="dim"),
        writer_text(fact.run_id, fact.node_id, fact.iteration, short=True),
    )


def _field_table() -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim", no_wrap=True)
    table.add_column()
    return table


def fact_detail(fact: Fact, now_ms: int) -> RenderableType:
    """The fact inspector: address, value, TTL and why it is remembered (its last writer)."""
    head = _field_table()
    head.add_row("namespace", literal(fact.namespace))
    head.add_row("key", literal(fact.key))
    expires = fact.expires_at_ms
    if expires is None:
        head.add_row("ttl", Text("never expires"))
    else:
        head.add_row(
            "ttl",
            Text(f"{duration(fact.ttl_ms)} from the last write; expires in "
                 f"{duration(max(0, expires - now_ms))} ({clock_time(expires)})"),
        )
    why = _field_table()
    why.add_row("written by", writer_text(fact.run_id, fact.node_id, fact.iteration))
    if fact.iteration is not None and fact.run_id is not None:
        why.add_row("iteration", Text(str(fact.iteration)))
    why.add_row("last write", Text(f"{clock_time(fact.updated_at_ms)} "
                                   f"({ago(now_ms, fact.updated_at_ms)})"))
    why.add_row("first write", Text(clock_time(fact.created_at_ms)))
    return Group(
        Text("Fact", style="bold underline"),
        head,
        Text(""),
        Text("Value", style="bold"),
        literal(pretty_json(fact.value_json)),
        Text(""),
        Text("Why is this remembered", style="bold"),
        why,
        Text(""),
        Text("e edit value/TTL · d delete · n new fact", style="dim"),
    )


def namespace_detail(namespace: str, facts: Sequence[Fact]) -> RenderableType:
    """The inspector for a namespace heading."""
    table = _field_table()
    table.add_row("namespace", literal(namespace))
    table.add_row("facts", Text(str(len(facts))))
    return Group(
        Text("Namespace", style="bold underline"),
        table,
        Text(""),
        Text("n adds a fact here", style="dim"),
    )


# -- notes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoteLinks:
    """A note's supersession neighbours: what it supersedes and what supersedes it."""

    supersedes: tuple[Note, ...] = ()
    superseded_by: tuple[Note, ...] = ()
    history: tuple[tuple[int, Note], ...] = ()
    """Older versions further down the chain: (depth, note), depth 2 = what a target replaced."""
    retired: frozenset[str] = frozenset()
    """Which of the notes it supersedes an accepted note (another one) retired already."""


@dataclass
class NoteBook:
    """The notes the view shows, plus which of them are retired and their edges."""

    notes: list[Note] = field(default_factory=list)
    retired: set[str] = field(default_factory=set)
    links: dict[str, NoteLinks] = field(default_factory=dict)

    def by_id(self, note_id: str) -> Note | None:
        """The shown note with this id."""
        for note in self.notes:
            if note.id == note_id:
                return note
        return None


def shown_status(note: Note, retired: set[str]) -> str:
    """pending | accepted | retired (accepted but superseded by an accepted note) | rejected."""
    if note.status == "accepted" and note.id in retired:
        return "retired"
    return note.status


def note_order(notes: Iterable[Note], retired: set[str]) -> list[Note]:
    """Pending proposals first (oldest first: the review queue), then live accepted notes,
    then retired and rejected ones, each newest first."""

    def rank(note: Note) -> tuple[int, int]:
        status = shown_status(note, retired)
        if status == "pending":
            return (0, note.created_at_ms)
        group = {"accepted": 1, "retired": 2, "rejected": 3}[status]
        return (group, -note.created_at_ms)

    return sorted(notes, key=rank)


def status_cell(status: str) -> Text:
    """A note status with its glyph and colour."""
    style = NOTE_STYLES.get(status, "")
    return Text(f"{NOTE_GLYPHS.get(status, '·')} {status}", style=style)


def note_row_key(note_id: str) -> str:
    """Row key of a note in the notes table."""
    return f"note{ROW_SEP}{note_id}"


def note_matches(note: Note, needle: str) -> bool:
    """The ``/`` filter over namespace, body, id, author, kind and tags."""
    return matches(needle, note.namespace, note.body, note.id, note.author, note.kind,
                   " ".join(note.tags))


NOTE_NAMESPACE_CELLS = 24
"""Width of the notes list's namespace column (longer namespaces end with an ellipsis)."""


def note_rows(
    book: NoteBook, needle: str, now_ms: int, body_width: int = 44,
    marked: frozenset[str] | set[str] = frozenset(),
    namespace_width: int = NOTE_NAMESPACE_CELLS,
    author_width: int = 14,
) -> list[tuple[str, Cells]]:
    """Rows of the notes table in review order (columns: see the Memory view's NOTE_COLUMNS);
    notes marked for a bulk decision show ``●``."""
    rows: list[tuple[str, Cells]] = []
    for note in note_order(book.notes, book.retired):
        if not note_matches(note, needle):
            continue
        links = book.links.get(note.id, NoteLinks())
        rows.append((
            note_row_key(note.id),
            _note_cells(note, shown_status(note, book.retired), len(links.supersedes),
                        now_ms // 60_000 * 60_000, body_width, note.id in marked,
                        namespace_width, author_width),
        ))
    return rows


@functools.lru_cache(maxsize=8192)
def _note_cells(
    note: Note, status: str, supersedes: int, now_ms: int, body_width: int, marked: bool = False,
    namespace_width: int = NOTE_NAMESPACE_CELLS, author_width: int = 14,
) -> tuple[Text, ...]:
    edges = Text(f"⇢{supersedes}", style="yellow") if supersedes else Text("")
    body_style = "dim" if status in ("retired", "rejected") else ""
    state = status_cell(status)
    state = (Text("● ", style="bold magenta") if marked else Text("  ")) + state
    return (
        state,
        one_line(note.namespace, "cyan", width=namespace_width),
        one_line(readable_body(note.body), body_style, width=body_width),
        edges,
        one_line(note.author or "–", width=author_width),
        Text(coarse_age(now_ms, note.created_at_ms), style="dim"),
    )


PERSON_AUTHORS = {"cli": "a person, with the command line (tether notes)",
                  "dashboard": "a person, in the dashboard"}


def note_writer(note: Note) -> Text:
    """Who wrote a note, in one line that agrees with its author: the run and node an agent
    wrote it in (``agent:review`` in run r-1/review), or the person and the tool they used."""
    if note.run_id is not None:
        text = writer_text(note.run_id, note.node_id, note.iteration)
        if note.author:
            text = literal(note.author) + Text(" in run ", style="dim") + text
        return text
    if note.author in PERSON_AUTHORS:
        return Text(PERSON_AUTHORS[note.author])
    if note.author:
        return literal(note.author) + Text(" (no run recorded)", style="dim")
    return Text("a person (dashboard or CLI)", style="dim")


def provenance_table(note: Note, now_ms: int) -> Table:
    """Who wrote a note, where, when, and what a person decided about it."""
    table = _field_table()
    table.add_row("id", literal(note.id))
    table.add_row("namespace", literal(note.namespace))
    table.add_row("written by", note_writer(note))
    table.add_row("written at", Text(f"{clock_time(note.created_at_ms)} "
                                     f"({ago(now_ms, note.created_at_ms)})"))
    if note.kind:
        table.add_row("kind", literal(note.kind))
    if note.tags:
        table.add_row("tags", literal(", ".join(note.tags)))
    if note.status_changed_at_ms is not None:
        decided = Text(f"{note.status} at {clock_time(note.status_changed_at_ms)}")
        if note.status_reason:
            decided.append(" — reason: ")
            decided.append_text(literal(note.status_reason))
        table.add_row("decision", decided)
    return table


def why_remembered(note: Note, links: NoteLinks, retired: set[str]) -> list[RenderableType]:
    """The supersession chain in words: what this note replaces and what replaces it."""
    lines: list[RenderableType] = []
    status = shown_status(note, retired)
    if status == "pending":
        lines.append(Text("Proposed, not yet reviewed: it reaches no prompt until accepted."))
    elif status == "accepted":
        lines.append(Text("Accepted and live: recall may inject it into task prompts."))
    elif status == "retired":
        lines.append(Text("Retired: an accepted note supersedes it, so recall skips it."))
    else:
        lines.append(Text("Rejected: it reaches no prompt and retires nothing."))
    if links.supersedes:
        heading = "Retires" if note.status == "accepted" else "Would retire when accepted"
        lines.append(Text(f"{heading}:", style="bold"))
        lines.append(_neighbours(links.supersedes, retired | links.retired))
    if links.history:
        lines.append(Text("Earlier versions (what those replaced):", style="bold"))
        for depth, older in links.history:
            line = Text("  " * (depth - 1) + "↳ ", style="dim")
            line.append_text(one_line(older.id, "dim"))
            line.append("  ")
            line.append_text(one_line(readable_body(older.body), width=60))
            lines.append(line)
    if links.superseded_by:
        lines.append(Text("Superseded by:", style="bold"))
        lines.append(_neighbours(links.superseded_by, retired))
    return lines


def _neighbours(notes: Sequence[Note], retired: set[str]) -> Table:
    """Notes one supersession edge away: status, id, body (wrapped)."""
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(ratio=1)
    for other in notes:
        body = one_line(other.id, "dim")
        body.append("\n")
        body.append_text(readable_text(other.body))
        table.add_row(status_cell(shown_status(other, retired)), body)
    return table


def note_detail(note: Note, links: NoteLinks, retired: set[str], now_ms: int) -> RenderableType:
    """The note inspector: body, provenance and the supersession chain."""
    keys = "a accept · r reject · enter review side by side"
    if note.status != "pending":
        keys = "enter review side by side"
    return Group(
        Text("Note", style="bold underline"),
        status_cell(shown_status(note, retired)),
        Text(""),
        readable_text(note.body),
        Text(""),
        Text("Why is this remembered", style="bold"),
        provenance_table(note, now_ms),
        *why_remembered(note, links, retired),
        Text(""),
        Text(keys, style="dim"),
    )


def verdict_text(note: Note, links: NoteLinks) -> Text:
    """What accepting or rejecting this note will do, in one or two sentences."""
    count = len(links.supersedes)
    if note.status != "pending":
        return Text(f"This note is {note.status}; a pending proposal is what gets reviewed.",
                    style="dim")
    if count == 0:
        return Text("Accept makes it live for recall. Reject keeps it out of every prompt.")
    noun = "note" if count == 1 else f"{count} notes"
    return Text(
        f"Accept makes it live and retires the {noun} on the right at once. "
        f"Reject keeps it out of every prompt and leaves the {noun} live."
    )
