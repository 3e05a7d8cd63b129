"""A DataTable that is updated by diffing keyed rows, so the cursor stays on the same item."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowDoesNotExist

Cells = Sequence[Text]
MIN_MAIN_WIDTH = 12
"""The main column never shrinks below this; longer text is cut with an ellipsis."""
MAX_WHOLE_MAIN = 40
"""Optional columns give way until the main column shows its longest value whole, up to this
many cells (a workflow name stays whole at 80 columns)."""


class KeyedTable(DataTable[Text]):
    """Rows are identified by a stable key (run id, node#iteration, ...).

    :meth:`sync` replaces the content with a new ordered list of ``(key, cells)`` while keeping
    the cursor on the row with the same key. Only cells that changed are rewritten; when the
    order changes or most rows go away, the table is rebuilt in one batch. Keep the number of
    rows bounded (a window of the newest items): every DataTable mutation costs O(rows).

    Cells are always given for every column; ``optional`` columns are left out, in the order
    given, while the table is too narrow to show them all with the main column at its
    minimum (an 80-column terminal then shows the columns that matter whole, instead of a
    table that scrolls sideways).
    """

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(
        self, columns: Sequence[tuple[str, str]], *, stretch: str | None = None,
        optional: Sequence[str] = (), **kwargs: object,
    ) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._all_columns = list(columns)
        self._columns = list(columns)
        """The columns shown (all but the optional ones the width has no room for)."""
        self._optional = list(optional)
        self._cells: dict[str, Cells] = {}
        """Every column's cell of each row shown (to show a column again on a resize)."""
        self._order: list[str] = []
        self._stretch = stretch
        """The main column, widened to take the width the others leave (None: no stretch)."""
        self._others_width = 0
        self._main_widest = 0
        self._drawn_geometry: tuple[object, ...] | None = None
        """The size and column widths the cached cells were rendered at."""
        self._look: tuple[str, ...] | None = None
        """The styles the cached cells were rendered with (see :meth:`notify_style_update`)."""
        for key, label in self._columns:
            self.add_column(label, key=key)

    def notify_style_update(self) -> None:
        """Keep the rendered cells when a style update changed nothing they depend on.

        Textual re-applies every style each time a view is shown, and DataTable then drops
        every cell it has rendered, so each visit rendered each visible cell again: most of a
        view switch (two tables of 20 rows: about 450 cells). A cell's look depends only on
        this table's styles and its component classes' (the cache keys already hold the
        pseudo-classes and the data version), so when those read as they did when the cached
        cells were rendered, the cells stay.
        """
        if self._look is not None and self._current_look() == self._look:
            super(DataTable, self).notify_style_update()  # Widget's: its own style caches
            self.refresh()
            return
        self._look = None  # recorded again by the next render
        super().notify_style_update()

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._look is None:
            self._look = self._current_look()
        # The rendered cells and rows are valid for the widths they were drawn at (DataTable
        # keys them by its update count, not by width): drop them when the table's size or a
        # column's width changed since the last render, and only then (see on_resize).
        geometry = (self.size, tuple(c.get_render_width(self) for c in self.ordered_columns))
        if geometry != self._drawn_geometry:
            self._drawn_geometry = geometry
            self._update_count += 1
        return super().render_lines(crop)

    def _current_look(self) -> tuple[str, ...] | None:
        """This table's styles and its component classes', as CSS text (None before the
        component styles exist)."""
        try:
            return (self.styles.css, *(
                self.get_component_styles(name).css for name in sorted(self.COMPONENT_CLASSES)
            ))
        except KeyError:
            return None

    def _size_updated(
        self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
    ) -> bool:
        resized = super()._size_updated(size, virtual_size, container_size, layout)
        if resized and size.width:
            # Sized by the layout: stretch the main column now, before the first render,
            # rather than on the Resize that follows it (the first frame would show the
            # column too narrow, and every visible cell would be drawn twice).
            self.stretch_main_column()
        return resized

    def on_resize(self, event: events.Resize) -> None:
        # DataTable drops every rendered cell on any Resize, even one to the size they were
        # drawn at: the first layout of a view, and each view warmed off screen, then drew
        # every visible cell twice. render_lines drops them when the geometry really changed.
        event.prevent_default()
        keep, order = self.cursor_key, self._order
        if self._choose_columns(self._cell_widths(self._cells.values())):
            self._order = []  # every row is added again, with the columns now shown
            self.sync([(key, self._cells[key]) for key in order])
            if keep is not None:
                self.select_key(keep)
        self.stretch_main_column()

    def _shown(self, cells: Cells) -> list[Text]:
        """The cells of the columns shown, from a row's cells for every column."""
        shown = {key for key, _ in self._columns}
        return [cell for (key, _), cell in zip(self._all_columns, cells, strict=False)
                if key in shown]

    def _cell_widths(self, rows: Iterable[Cells]) -> dict[str, int]:
        """Each column's widest cell or label over ``rows`` (every column, shown or not)."""
        widths = {key: Text(label).cell_len for key, label in self._all_columns}
        for cells in rows:
            for (key, _), cell in zip(self._all_columns, cells, strict=False):
                widths[key] = max(widths[key], cell.cell_len)
        return widths

    def _choose_columns(self, widths: dict[str, int]) -> bool:
        """Leave out optional columns (in order) until the rest fit the table's width with
        the main column at its minimum; True when the columns shown changed (they are then
        re-added, and the rows must be too)."""
        width = self.scrollable_content_region.width
        if not self._optional or not width:
            return False
        keys = [key for key, _ in self._all_columns]
        for dropped in self._optional:
            if self._needed(widths, keys) <= width:
                break
            keys.remove(dropped)
        if keys == [key for key, _ in self._columns]:
            return False
        self._columns = [(key, label) for key, label in self._all_columns if key in keys]
        self.clear(columns=True)
        for key, label in self._columns:
            self.add_column(label, key=key)
        return True

    def _needed(self, widths: dict[str, int], keys: Sequence[str]) -> int:
        """The cells columns ``keys`` take with the main column whole (up to
        :data:`MAX_WHOLE_MAIN`), each at its widest cell or label, padding included."""
        main = min(MAX_WHOLE_MAIN, max(MIN_MAIN_WIDTH, widths.get(self._stretch or "", 0)))
        needed = {**widths, self._stretch or "": main}
        return sum(needed[key] + 2 * self.cell_padding for key in keys)

    def needed_width(self, leave_out: int = 0) -> int:
        """The content width the rows shown need with every column, or without the first
        ``leave_out`` optional ones (what a layout gives the table decides which it shows)."""
        keys = [key for key, _ in self._all_columns if key not in self._optional[:leave_out]]
        return self._needed(self._cell_widths(self._cells.values()), keys)

    @property
    def optional_count(self) -> int:
        """How many columns give way when the table is narrow."""
        return len(self._optional)

    def _fit_columns(self, widths: dict[str, int]) -> None:
        """Size each automatic column to the rows it will now show (``widths``). DataTable
        only ever widens a column, even across clear(): rows cut shorter for a narrower
        terminal then sat in columns as wide as the old terminal's, and the columns after
        them went off the edge."""
        for key, _ in self._columns:
            column = self.columns.get(ColumnKey(key))
            if column is not None and column.auto_width and column.content_width != widths[key]:
                column.content_width = widths[key]
                self._require_update_dimensions = True

    def _measure(self, widths: dict[str, int]) -> None:
        """Width the other columns shown will take with the rows ``widths`` was measured on
        (as DataTable sizes an automatic column: its widest cell or label), so the main column
        is sized before the first render instead of after it (each extra render redraws every
        visible cell)."""
        if self._stretch is None:
            return
        self._main_widest = widths.get(self._stretch, 0)
        self._others_width = sum(
            max(widths[key], self.columns[ColumnKey(key)].content_width) + 2 * self.cell_padding
            for key, _ in self._columns if key != self._stretch
        )

    def stretch_main_column(self) -> None:
        """Give the main column what the other columns leave of the table's width, so a wide
        terminal shows whole names instead of a table in the left half."""
        if self._stretch is None or not self.size.width:
            return
        main = self.columns.get(ColumnKey(self._stretch))
        if main is None:
            return
        spare = self.scrollable_content_region.width - self._others_width - 2 * self.cell_padding
        # As wide as its longest value, not wider: on a wide terminal the numbers stay next to
        # the names they belong to instead of across a gap (the rest of the width stays free).
        wanted = max(MIN_MAIN_WIDTH, min(spare, self._main_widest + 2))
        if main.auto_width or main.width != wanted:
            main.auto_width = False
            main.width = wanted
            self._require_update_dimensions = True
            self.refresh()

    def relabel(self, key: str, label: str) -> None:
        """Give column ``key`` a new heading, kept when narrow-width changes re-add the
        columns."""
        self._all_columns = [(k, label if k == key else old) for k, old in self._all_columns]
        self._columns = [(k, label if k == key else old) for k, old in self._columns]
        column = self.columns.get(ColumnKey(key))
        if column is not None and column.label.plain != label:
            column.label = Text(label)
            self._require_update_dimensions = True
            self.refresh()

    @property
    def keys(self) -> list[str]:
        """Row keys in display order."""
        return list(self._order)

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor, or None when the table is empty."""
        if not self._order or self.cursor_row < 0 or self.cursor_row >= len(self._order):
            return None
        return self._order[self.cursor_row]

    def select_key(self, key: str) -> bool:
        """Move the cursor to the row with ``key``; False when there is no such row."""
        if key not in self._order:
            return False
        self.move_cursor(row=self._order.index(key), animate=False)
        return True

    def update_row(self, key: str, cells: Cells) -> bool:
        """Rewrite the changed cells of an existing row; False when the row is not shown."""
        if key not in self._order:
            return False
        self._cells[key] = cells
        changed, widened = self._rewrite(key, cells)
        if widened:
            self._measure(self._cell_widths(self._cells.values()))
            self.stretch_main_column()
        return changed

    def _rewrite(self, key: str, cells: Cells) -> tuple[bool, bool]:
        """Rewrite the cells of row ``key`` that changed: whether any did, and whether one was
        wider than its column (which then widens: a run going from running to finished must
        not be cut to "finishe"; the main column gives the width back)."""
        changed = widened = False
        for (column, _label), cell in zip(self._columns, self._shown(cells), strict=False):
            try:
                current = self.get_cell(key, column)
            except (CellDoesNotExist, RowDoesNotExist):
                continue
            if current != cell:
                changed = True
                wider = column != self._stretch and (
                    cell.cell_len > self.columns[ColumnKey(column)].content_width
                )
                widened = widened or wider
                self.update_cell(key, column, cell, update_width=wider)
        return changed, widened

    def sync(self, rows: Sequence[tuple[str, Cells]]) -> bool:
        """Show exactly ``rows`` (in order); returns True when anything changed.

        A key listed twice is shown once (its first row): a view built from several queries
        can see one item twice while another process moves it between them (a note accepted
        between reading the pending and the accepted ones), and that must not crash the view.
        """
        unique: dict[str, tuple[str, Cells]] = {}
        for key, cells in rows:
            unique.setdefault(key, (key, cells))
        rows = list(unique.values())
        keep = self.cursor_key
        new_order = [key for key, _ in rows]
        changed = False
        self._cells = {key: cells for key, cells in rows}
        widths = self._cell_widths(self._cells.values())
        with self.app.batch_update():
            if self._choose_columns(widths):
                self._order = []
            self._fit_columns(widths)
            self._measure(widths)
            self.stretch_main_column()
            if new_order != self._order:
                changed = True
                row = self.cursor_row
                self.clear()
                for key, cells in rows:
                    self.add_row(*self._shown(cells), key=key)
                self._order = new_order
                if keep is not None and keep in new_order:
                    self.move_cursor(row=new_order.index(keep), animate=False)
                elif keep is not None and new_order:
                    # The row went (deleted, filtered out): the cursor stays where it was,
                    # on the row that took its place.
                    self.move_cursor(row=min(max(0, row), len(new_order) - 1), animate=False)
            else:
                for key, cells in rows:
                    changed = self._rewrite(key, cells)[0] or changed
        return changed
