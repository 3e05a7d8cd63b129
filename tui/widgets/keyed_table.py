"""A DataTable that is updated by diffing keyed rows, so the cursor stays on the same item."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist

Cells = Sequence[Text]


class KeyedTable(DataTable[Text]):
    """Rows are identified by a stable key (run id, node#iteration, ...).

    :meth:`sync` replaces the content with a new ordered list of ``(key, cells)`` while keeping
    the cursor on the row with the same key. Only cells that changed are rewritten; when the
    order changes or most rows go away, the table is rebuilt in one batch. Keep the number of
    rows bounded (a window of the newest items): every DataTable mutation costs O(rows).
    """

    def __init__(self, columns: Sequence[tuple[str, str]], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._columns = list(columns)
        self._order: list[str] = []
        for key, label in self._columns:
            self.add_column(label, key=key)

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
        changed = False
        for (column, _label), cell in zip(self._columns, cells, strict=False):
            if self.get_cell(key, column) != cell:
                changed = True
                self.update_cell(key, column, cell, update_width=False)
        return changed

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
        with self.app.batch_update():
            if new_order != self._order:
                changed = True
                self.clear()
                for key, cells in rows:
                    self.add_row(*cells, key=key)
                self._order = new_order
                if keep is not None and keep in new_order:
                    self.move_cursor(row=new_order.index(keep), animate=False)
            else:
                column_keys = [key for key, _ in self._columns]
                for key, cells in rows:
                    for column, cell in zip(column_keys, cells, strict=False):
                        try:
                            current = self.get_cell(key, column)
                        except (CellDoesNotExist, RowDoesNotExist):
                            continue
                        if current != cell:
                            changed = True
                            self.update_cell(key, column, cell, update_width=False)
        return changed
