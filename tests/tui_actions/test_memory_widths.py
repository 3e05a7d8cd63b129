"""The Memory view at 120, 160 and 240 columns, read as a reviewer reads it: namespaces, note
bodies, authors and what wrote a fact shown whole (a body cut only when no column sits blank
beside it, and then whole in the inspector), and the notes table's columns aligned."""

from __future__ import annotations

import pytest

from tests.tui_actions.memory_seed import Seeded
from tests.tui_actions.pilot_support import screen_lines, until
from tests.tui_actions.test_memory_view import MakeApp, on_note, open_memory

BODIES = ("Always lint (ruff) before running the tests.", "[bold red]x[/] prefers small diffs",
          "Lint first; it catches import errors early.", "Run ruff before pytest.")


def notes_panel(lines: list[str]) -> tuple[str, list[str]]:
    """The notes table's header line and its rows, cut to the notes panel's borders."""
    top = next(i for i, line in enumerate(lines) if "─ Notes (" in line)
    left = lines[top].index("╭")
    right = lines[top].index("╮", left)
    inside = [line[left + 1 : right] for line in lines[top + 1 :]]
    header = next(line for line in inside if "Status" in line and "Author" in line)
    rows = [line for line in inside if "pending" in line or "accepted" in line]
    return header, rows


@pytest.mark.parametrize("width", [120, 160, 240])
async def test_the_memory_view_reads_whole_and_aligned(
    make_app: MakeApp, seeded: Seeded, width: int
) -> None:
    app = make_app()
    async with app.run_test(size=(width, 40)) as pilot:
        screen = await open_memory(app, pilot)
        await until(pilot, lambda: any("─ Notes (" in line for line in screen_lines(app)),
                    "the notes table")
        lines = screen_lines(app)
        text = "\n".join(lines)
        # Facts: namespaces, values and what wrote them, whole.
        for whole in ("workflow:code-review", "user:ada", '{"max_files":20}', "run-1a2b/plan",
                      '"use pytest -x"', "Written by"):
            assert whole in text, (whole, text)
        header, rows = notes_panel(lines)
        assert len(rows) == 4, rows
        columns = {name: header.index(name) for name in ("Namespace", "Note", "Author", "Age")}
        for row in rows:
            # Every column starts where its heading does.
            assert row[columns["Namespace"]:].startswith("workflow:code-review"), row
            assert row[columns["Author"]:].startswith(("consolidator", "reviewer-agent")), row
            assert row[columns["Age"]:].startswith("<1m ago"), row
        blank = min(len(row) - len(row.rstrip()) for row in rows)
        cut = [row for row in rows if not any(body in row for body in BODIES)]
        for row in cut:
            body = row[columns["Note"] : columns["Author"]].rstrip().rstrip("⇢0123456789 ")
            assert body.endswith("…") and any(b.startswith(body[:-1]) for b in BODIES), row
        # A body is cut only when the table has no blank room left to give it.
        assert not cut or blank <= 3, (blank, rows)
        # The inspector shows the note under the cursor whole, at any width.
        await on_note(screen, pilot, seeded.rule)
        await until(pilot, lambda: BODIES[0] in "\n".join(screen_lines(app))
                    .replace("│", " ").replace("  ", " "), "the note whole in the inspector")
