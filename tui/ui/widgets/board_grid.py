"""The board's table view: the domain's :class:`~tui.domain.board.table.BoardTable` in a DataTable.

One row per run, the run column fixed while the others scroll. The cursor is a cell: its
row is the selected run, its column is what ``[``/``]`` sort by and ``/`` filters on. The
table is rebuilt only when what it shows changed (the board is rebuilt on every run update).

Every value shows whole or not at all (issue 17, ``1.46 s`` read ``46 s``, ``12.07 ~-3``):
the scroll stops only at a column's left edge, and the table is as wide as the fixed
columns plus the scrolled ones that fit whole from there; the columns left out at either
side are announced (:class:`BoardGrid.ColumnsOutOfView`) for the board to name under it.
The selected run's ``▸`` is drawn over the rendered line, not written into its cell: a
DataTable's ``update_cell`` invalidates the render cache of every cell, so each Up/Down
re-rendered every column of every visible row (issue 22: 50-130 ms a key at 120x40).
Nor does a new size clear that cache (:meth:`BoardGrid.on_resize`): each column step, each
toggle to the table changes the table's width or height, and every visible cell was drawn
twice for one key (issue 39: ``t``, ←/→ and the sort at 120x40 were the slowest keys).
"""

from __future__ import annotations

from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import DataTable

from tui.domain.board.table import BoardTable, Column, Row
from tui.domain.board.view import Board
from tui.ui.board_cells import cell_content, column_title, to_rich_text

Signature = tuple[object, ...]
MARK = "▸"  # the selected run, in the label cell's first column (board_cells.label_content)


def row_key(row: Row) -> str:
    """The DataTable key of a run's row: its id (or its label, for a run not stored)."""
    return str(row.run.id) if row.run.id is not None else row.label


class BoardGrid(DataTable[object]):
    """The runs as a table; announces the run under the cursor."""

    BINDINGS = [  # noqa: RUF012 (DataTable declares it without ClassVar)
        Binding("ctrl+pageup", "page_left", "Page left", show=False),
        Binding("ctrl+pagedown", "page_right", "Page right", show=False),
    ]

    class ColumnsOutOfView(Message):
        """The titles of the columns the table leaves out now: ``left`` (scrolled past)
        and ``right`` (beyond its right edge)."""

        def __init__(self, left: tuple[str, ...], right: tuple[str, ...]) -> None:
            super().__init__()
            self.left, self.right = left, right

    class RunHighlighted(Message):
        """The cursor moved to the run ``run_id``."""

        def __init__(self, run_id: int | None) -> None:
            super().__init__()
            self.run_id = run_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="cell", zebra_stripes=True, fixed_columns=1)
        self._table: BoardTable | None = None
        self._signature: Signature = ()
        self._rendering = False
        self._marked: int | None = None  # the run whose label carries the selection mark
        self._fitted: int | None = None  # the width last set by fit_width (None: the CSS's)
        self._marked_row: int | None = None  # its row index (rows are one line high)
        self._shown = (0, 0)  # the scrolled columns shown whole: first, last (exclusive)

    @property
    def table(self) -> BoardTable | None:
        """The board table shown."""
        return self._table

    @property
    def board_column(self) -> Column | None:
        """The board column under the cursor."""
        table = self._table
        if table is None or not table.columns:
            return None
        return table.columns[min(self.cursor_coordinate.column, len(table.columns) - 1)]

    @property
    def cursor_row_data(self) -> Row | None:
        """The board row under the cursor."""
        table = self._table
        if table is None or not table.rows:
            return None
        return table.rows[min(self.cursor_coordinate.row, len(table.rows) - 1)]

    def show(self, board: Board, selected: int | None) -> None:
        """Show ``board``'s table with the run ``selected`` under the cursor."""
        table = board.table
        view = board.view
        signature = (
            self._signature
            if table is self._table
            else _signature(table, view.sort, view.descending)
        )  # the same table (a selection move): nothing to compare
        if signature == self._signature:
            self._table = table
            self._mark(selected)
            return
        column = self.board_column
        keep = column.key if column is not None else None
        self._signature, self._table = signature, table
        self._rendering = True
        try:
            self.clear(columns=True)
            for col in table.columns:
                title = column_title(col, sort=view.sort, descending=view.descending)
                self.add_column(to_rich_text(title, self.app.theme_variables), key=col.key)
            for row in table.rows:
                cells = [self._cell(row, c, i) for i, c in enumerate(table.columns)]
                self.add_row(*cells, key=row_key(row))
            self._marked, self._marked_row = None, None
            self._mark(selected)
            self._place_cursor(table, selected, keep)
        finally:
            self._rendering = False
        self.call_after_refresh(self.snap_to_column)

    @property
    def shown_columns(self) -> tuple[Column, ...]:
        """The scrolled columns shown whole now (the fixed run column not counted)."""
        table = self._table
        if table is None:
            return ()
        first, last = self._shown
        return table.columns[self.fixed_columns + first : self.fixed_columns + last]

    @property
    def marked_row(self) -> int | None:
        """The row index that carries the selection mark (``None``: no run selected)."""
        return self._marked_row

    def _mark(self, selected: int | None) -> None:
        """Move the selection mark: the two rows' lines are drawn again, from the cache."""
        table = self._table
        if table is None or selected == self._marked:
            return
        before = self._marked_row
        rows = [r.run.id for r in table.rows]
        self._marked = selected
        self._marked_row = rows.index(selected) if selected in rows else None
        for index in (before, self._marked_row):
            if index is not None and index < self.row_count:
                self.refresh_row(index)

    def on_resize(self, event: events.Resize) -> None:
        """A new size draws no cell again: the DataTable's own handler (skipped here) marks
        every rendered cell stale on each resize, yet this table's cells do not depend on
        its size (one-line rows, columns as wide as their contents; its line cache is keyed
        by the width and the scroll already). The frame that resized the table had drawn
        every visible cell, and the next drew them all again (issue 39)."""
        event.prevent_default()

    def render_line(self, y: int) -> Strip:
        """The DataTable's line, with the selection mark over its label cell's first column."""
        strip = super().render_line(y)
        header = self.header_height if self.show_header else 0
        marked = self._marked_row
        if marked is None or y < header or y - header + self.scroll_offset.y != marked:
            return strip
        x = self.cell_padding  # the label cell's first column, after its padding
        if strip.cell_length <= x:
            return strip
        under = list(strip.crop(x, x + 1))
        style = under[0].style if under else None
        mark = Strip([Segment(MARK, style)], 1)
        return Strip.join([strip.crop(0, x), mark, strip.crop(x + 1)])

    def _cell(self, row: Row, column: Column, index: int) -> object:
        content = cell_content(row, column, row.cells[index])  # the mark: render_line
        return to_rich_text(content, self.app.theme_variables)

    def _place_cursor(self, table: BoardTable, selected: int | None, column: str | None) -> None:
        rows = [r.run.id for r in table.rows]
        row = rows.index(selected) if selected in rows else max(0, len(rows) - 1)
        keys = [c.key for c in table.columns]
        col = keys.index(column) if column in keys else 0
        if rows:
            self.move_cursor(row=row, column=col, animate=False, scroll=True)
        else:
            self.cursor_coordinate = Coordinate(0, 0)

    def column_edges(self) -> list[int]:
        """The scroll positions at which a scrolled column starts right after the fixed
        ones (0 first): the only positions where no value is cut at the left."""
        edges, x = [], 0
        for column in self.ordered_columns[self.fixed_columns :]:
            edges.append(x)
            x += column.get_render_width(self)
        return edges

    def snap_to_column(self) -> None:
        """Move the horizontal scroll to the next column edge, so the first scrolled column
        shows whole (``1.46 s``, not ``46 s``; DataTable scrolls by cells, not columns), and
        narrow the table to the columns that show whole from there (:meth:`fit_width`)."""
        x = round(self.scroll_x)
        edges = self.column_edges()
        if not edges:
            return
        later = [edge for edge in edges if edge >= x]
        target = later[0] if later else edges[-1]
        self.fit_width(edges.index(target))
        if target != x:  # once the narrower width is laid out, the edge can be reached
            self.call_after_refresh(self.scroll_to, x=target, animate=False, immediate=True)

    def fit_width(self, first: int) -> None:
        """Be as wide as the fixed columns plus the scrolled ones from ``first`` on that fit
        whole beside them (one at least: a column wider than the board alone is cut); name
        the columns left out at either side."""
        parent = self.parent
        table = self._table
        if not isinstance(parent, Widget) or table is None:
            return
        widths = [column.get_render_width(self) for column in self.ordered_columns]
        fixed = sum(widths[: self.fixed_columns])
        gutter = self.styles.scrollbar_size_vertical if self.show_vertical_scrollbar else 0
        room = parent.content_size.width - gutter - fixed
        used, last = 0, first
        for width in widths[self.fixed_columns + first :]:
            if used + width > room and last > first:
                break
            used, last = used + width, last + 1
        self._shown = (first, last)
        wanted = min(fixed + used + gutter, parent.content_size.width)
        if wanted != self._fitted:
            self._fitted = wanted
            self.styles.width = wanted
        titles = [  # as the header spells them (flags in their CLI form)
            column_title(column, sort=None, descending=False).plain
            for column in table.columns[self.fixed_columns :]
        ]
        # Announced each time (cheap): the board clears its note while the cards show.
        self.post_message(self.ColumnsOutOfView(tuple(titles[:first]), tuple(titles[last:])))

    def action_cursor_right(self) -> None:
        """→: the next column. While columns are left out at the right, the table scrolls
        by one column too, so each press shows one more (issue 39: → moved the cursor over
        the columns in view and nothing seemed to happen)."""
        first, last = self._shown
        if self.cursor_type != "cell" or last >= len(self.columns) - self.fixed_columns:
            super().action_cursor_right()
            return
        column = max(self.cursor_coordinate.column + 1, self.fixed_columns + first + 1)
        self._scroll_columns(first + 1, column)

    def action_cursor_left(self) -> None:
        """←: the previous column; while columns are scrolled past, back by one column."""
        first, _ = self._shown
        if self.cursor_type != "cell" or first == 0:
            super().action_cursor_left()
            return
        column = max(self.cursor_coordinate.column - 1, 0)
        self._scroll_columns(first - 1, column)

    def _scroll_columns(self, first: int, column: int) -> None:
        """Show the scrolled columns from ``first`` on, the cursor on ``column``."""
        edges = self.column_edges()
        first = max(0, min(first, len(edges) - 1))
        self.fit_width(first)
        self.move_cursor(column=column, animate=False, scroll=False)
        self.call_after_refresh(self.scroll_to, x=edges[first], animate=False, immediate=True)

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        """Announce the run under the cursor (not while the table is being rebuilt)."""
        self.call_after_refresh(self.snap_to_column)
        if self._rendering or self._table is None or not self._table.rows:
            return
        row = self._table.rows[min(event.coordinate.row, len(self._table.rows) - 1)]
        self.post_message(self.RunHighlighted(row.run.id))


def _signature(table: BoardTable, sort: str | None, descending: bool) -> Signature:
    cells = tuple(
        (r.label, r.is_baseline, *((c.text, c.comparison, c.differs) for c in r.cells))
        for r in table.rows
    )
    return (tuple(c.key for c in table.columns), cells, sort, descending)
