"""The results board: every run as cards or as a table, against one baseline.

The board renders the domain's :func:`~tui.domain.board.view.build_board` (table, baseline,
noise verdicts, scatter) and keeps the operator's choices in a
:class:`~tui.domain.board.view.BoardView`: the pinned baseline, sort, filter, the selected
run. Its keys (``t p v g n e l / [ ]``, Enter: :data:`tui.ui.keys.BOARD_KEYS`) act while it
has focus. It holds no session: what needs one (a run's detail with its log, repeat, export,
loading a run into the form) it posts as a message, and the screen carries it out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable, Static

from tui.domain.board.saved import SavedBoard
from tui.domain.board.table import BoardError, ColumnKind, flag_value
from tui.domain.board.view import Board, BoardView, build_board, resort_board
from tui.domain.fix_loop import choose_fix
from tui.domain.flags.serve import format_value
from tui.domain.results import RunRecord
from tui.ui import board_messages
from tui.ui.board_cells import out_of_view_text
from tui.ui.board_dialogs import ask_filter
from tui.ui.board_query import board_title, describe_view, filter_text, parse_filter
from tui.ui.keys import BAR_WIDTHS, board_bindings, offered
from tui.ui.screen_keeper import open_screen
from tui.ui.screens.board_plot import PlotScreen
from tui.ui.widgets.board_focus import BoardFocus
from tui.ui.widgets.board_frame import BoardFrame
from tui.ui.widgets.board_grid import BoardGrid
from tui.ui.widgets.board_run_keys import BoardRunKeys
from tui.ui.widgets.card_strip import CardStrip
from tui.ui.widgets.run_card import CardContext

MAX_CARDS = 40  # cards mounted at most: the baseline plus the latest ones (the table has all)
EMPTY_TEXT = "No runs yet. Edit the flags, then r starts the server with them."


# Card view: the board itself has focus and moves through the cards (the table, focused in
# table view, has its own cursor keys).
CARD_KEYS: list[BindingType] = [
    Binding("left", "cards('step', -1)", "Previous run", show=False),
    Binding("right", "cards('step', 1)", "Next run", show=False),
    Binding("home", "cards('step', -1000000)", "First run", show=False),
    Binding("end", "cards('step', 1000000)", "Last run", show=False),
    Binding("ctrl+pageup", "cards('page_cards', -1)", "Runs back", show=False),
    Binding("ctrl+pagedown", "cards('page_cards', 1)", "Runs on", show=False),
    Binding("up", "cards('scroll_card', -1)", "Scroll up", show=False),
    Binding("down", "cards('scroll_card', 1)", "Scroll down", show=False),
    Binding("pageup", "cards('page_card', -1)", "Page up", show=False),
    Binding("pagedown", "cards('page_card', 1)", "Page down", show=False),
]


class ResultsBoard(BoardFrame, BoardRunKeys, Vertical, can_focus=False):
    """Cards or a table of runs, a selected run, a pinned baseline; the board's keys.

    Its focus is held by a :class:`BoardFocus` inside it in card view, by its table in
    table view (the board itself restyled every card when it took or lost the focus).
    """

    BINDINGS: ClassVar[list[BindingType]] = [*board_bindings(), *CARD_KEYS]

    # What it posts (tui.ui.board_messages); the screen carries each out.
    LoadIntoForm = board_messages.LoadIntoForm
    ShowDetail = board_messages.ShowDetail
    RepeatRun = board_messages.RepeatRun
    ExportRun = board_messages.ExportRun
    KeepView = board_messages.KeepView

    def __init__(
        self, *, can_launch: bool = True, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._can_launch = can_launch  # False: attached, the commands that restart are not offered
        self._live: int | None = None  # the run serving now (the screen says which)
        self._runs: list[RunRecord] = []
        self._view = BoardView()
        self._board: Board | None = None
        self._table_mode = False
        self._fingerprint: tuple[object, ...] | None = None
        self._kept = SavedBoard()  # the pin and view as last saved

    def compose(self) -> ComposeResult:
        """The focus holder, the empty-board hint, the card strip and the (hidden) table."""
        yield BoardFocus(id="board-focus")
        yield Static(EMPTY_TEXT, id="board-empty")
        yield CardStrip(id="board-cards")
        yield BoardGrid(id="board-table")
        yield Static("", id="board-columns")  # the columns the table leaves out, named

    # -- what it shows ---------------------------------------------------------------------------
    @property
    def view(self) -> BoardView:
        """The operator's choices (pin, sort, filter, selection)."""
        return self._view

    @property
    def board(self) -> Board | None:
        """The board as last drawn."""
        return self._board

    def restore(self, saved: SavedBoard) -> None:
        """Take up the pin and view a previous console left (a filter that no longer
        reads is dropped); the runs are drawn again under them. Nothing saved, or what
        is shown already: nothing is redrawn (the board may have been scrolled meanwhile)."""
        if saved == self._kept:
            return
        try:
            row_filter = parse_filter(saved.filter)
        except BoardError:
            row_filter = self._view.filter
        self._view = replace(
            self._view,
            pinned=saved.pinned,
            sort=saved.sort,
            descending=saved.descending,
            filter=row_filter,
        )
        self._kept = saved
        if saved.table != self._table_mode:
            self.action_toggle_table()  # draws the board
        else:
            self._redraw()

    def _keep(self) -> None:
        """Say what a relaunch should find, when the operator changed it."""
        view = self._view
        saved = SavedBoard(
            view.pinned, self._table_mode, view.sort, view.descending, filter_text(view.filter)
        )
        if saved != self._kept:
            self._kept = saved
            self.post_message(self.KeepView(saved))

    @property
    def selected_run(self) -> RunRecord | None:
        """The run the operator is on (among the runs the filter shows).

        Read from the view shown, not from the last selection message: a key typed right
        after a move acts on the run moved to.
        """
        board = self._board
        if board is None:
            return None
        if self._table_mode:
            row = self.query_one(BoardGrid).cursor_row_data
            chosen = row.run.id if row is not None else None
        else:
            chosen = self.query_one(CardStrip).selected_id
        if chosen != self._view.selected:
            self._view = replace(self._view, selected=chosen)
        return next((r.run for r in board.table.rows if r.run.id == chosen), None)

    def show(self, runs: list[RunRecord], live: int | None = None) -> None:
        """Draw ``runs`` (oldest first); ``live``: the run whose server is ready now. The
        selection follows the newest run while it was on the newest one, so a new run comes
        into view.

        Skipped when nothing the board shows changed (a run's telemetry series grows while
        it lives; the board is rebuilt only for what its cards and table show).
        """
        fingerprint = (live, tuple(_shown_fields(r) for r in runs))
        if fingerprint == self._fingerprint:
            return
        self._live = live
        self._fingerprint = fingerprint
        newest_before = self._runs[-1].id if self._runs else None
        self._runs = list(runs)
        selected = self._view.selected
        if selected is None or selected == newest_before or all(r.id != selected for r in runs):
            self._view = replace(self._view, selected=runs[-1].id if runs else None)
        self._redraw(fallback=selected)

    def _redraw(self, fallback: int | None = None) -> None:
        """Rebuild and draw the board; a selection the filter hides falls back to ``fallback``
        (the run selected before), else to the last row."""
        try:
            board = build_board(self._runs, self._view)
        except BoardError:  # a sort column that is gone (its flag no longer differs)
            self._view = replace(self._view, sort=None, descending=False)
            board = build_board(self._runs, self._view)
        rows = [r.run.id for r in board.table.rows]
        if rows and self._view.selected not in rows:
            chosen = fallback if fallback in rows else rows[-1]
            self._view = replace(self._view, selected=chosen)
            board = build_board(self._runs, self._view)
        self._board = board
        self._draw(board)

    def _draw(self, board: Board) -> None:
        """Show ``board`` (as built) in the current mode, the view's selection marked."""
        self.query_one("#board-empty", Static).display = not self._runs
        self.border_title = board_title(board, self.size.width or 80)
        if self._table_mode:
            self.query_one(BoardGrid).show(board, self._view.selected)
        else:
            self.query_one(CardStrip).show(self._cards(board), self._view.selected)

    def _cards(self, board: Board) -> list[tuple[RunRecord, CardContext]]:
        rows = list(board.table.rows)
        if len(rows) > MAX_CARDS:
            base = [r for r in rows if r.is_baseline]
            rows = base + [r for r in rows[-(MAX_CARDS - len(base)) :] if not r.is_baseline]
        hint_id, hint = fix_hint(self._runs) if self._can_launch else (None, None)
        live = self._live
        base_label = board.baseline.label if board.baseline is not None else None
        return [
            (
                row.run,
                CardContext(
                    row,
                    board.table.columns,
                    base_label,
                    live=row.run.id == live,
                    fix_hint=hint if row.run.id == hint_id else None,
                ),
            )
            for row in rows
        ]

    # -- focus and selection ---------------------------------------------------------------------
    def focus(self, scroll_visible: bool = True) -> ResultsBoard:
        """Focus the board: its focus holder (card view) or its table (table view)."""
        target = BoardGrid if self._table_mode else BoardFocus
        self.query_one(target).focus(scroll_visible)
        return self

    def on_click(self) -> None:
        """A click on the cards focuses the board (they and the board take no focus)."""
        if not self._table_mode and not self.has_focus_within:
            self.focus()

    def action_cards(self, action: str, amount: int) -> None:
        """A card-view key: ``step``, ``page_cards``, ``scroll_card`` or ``page_card``."""
        if not self._table_mode:
            strip = self.query_one(CardStrip)
            {
                "step": strip.action_step,
                "page_cards": strip.action_page_cards,
                "scroll_card": strip.action_scroll_card,
                "page_card": strip.action_page_card,
            }[action](amount)

    @on(BoardGrid.ColumnsOutOfView)
    def _columns_out_of_view(self, event: BoardGrid.ColumnsOutOfView) -> None:
        """Name the columns the table leaves out, on the line under it."""
        line = self.query_one("#board-columns", Static)
        # the line spans the board's content box; it is hidden (width 0) until the first note,
        # so its own width would name fewer columns on the first event than on later ones
        note = out_of_view_text(event.left, event.right, self.content_size.width)
        shown = self._table_mode and bool(note)
        if line.display != shown:
            line.display = shown
        if note != str(line.render()):
            line.update(Content.styled(note, "$text-muted"))

    def on_resize(self, _: events.Resize) -> None:
        """A new width: the title says what fits it, the table the whole columns that fit."""
        if self._board is not None:
            self.border_title = board_title(self._board, self.size.width)
        if self._table_mode:
            grid = self.query_one(BoardGrid)
            grid.call_after_refresh(grid.snap_to_column)

    @on(CardStrip.Selected)
    @on(BoardGrid.RunHighlighted)
    def _selected(self, event: CardStrip.Selected | BoardGrid.RunHighlighted) -> None:
        event.stop()
        if event.run_id != self._view.selected and self._board is not None:
            # the board's rows do not depend on the selection: no rebuild, only the mark
            self._view = replace(self._view, selected=event.run_id)
            if self._table_mode:
                self.query_one(BoardGrid).show(self._board, event.run_id)

    @on(DataTable.CellSelected)
    def _cell_chosen(self, event: DataTable.CellSelected) -> None:
        event.stop()
        self.action_detail()

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = str(event.column_key.value)
        again = self._view.sort == key and not self._view.descending
        self._sort(key, descending=again)

    # -- actions ---------------------------------------------------------------------------------
    def action_toggle_table(self) -> None:
        """Cards <-> table (the selection stays)."""
        self._table_mode = not self._table_mode
        self.query_one(BoardFocus).can_focus = not self._table_mode  # the table takes it
        self.query_one(CardStrip).display = not self._table_mode
        self.query_one(BoardGrid).display = self._table_mode
        line = self.query_one("#board-columns", Static)
        # The note as last drawn shows with the table, in the same layout: the table names
        # the same columns as before unless its width changed (then the note follows), and
        # the note's line, shown a frame later, laid out the whole screen again (issue 39).
        line.display = self._table_mode and bool(str(line.render()))
        if self._table_mode:  # the width may have changed while the cards showed
            grid = self.query_one(BoardGrid)
            grid.call_after_refresh(grid.snap_to_column)
        self._draw(self._board) if self._board is not None else self._redraw()  # no rebuild
        self.fit_form()
        self.focus()
        self._keep()

    def action_pin(self) -> None:
        """Pin the selected run as the baseline; on the pinned run, unpin."""
        run = self._need_selected()
        if run is None:
            return
        pinned = None if self._view.pinned == run.id else run.id
        self._view = replace(self._view, pinned=pinned)
        self._redraw()
        self._keep()
        board = self._board
        header = board.header() if board is not None else ""
        self.notify(header, title="Baseline pinned" if pinned else "Baseline unpinned")

    def action_plot(self) -> None:
        """Throughput against latency, the Pareto frontier, for the runs shown."""
        if self._board is not None:
            open_screen(self.app, PlotScreen(self._runs, self._view))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A key's key-bar copy (``shown``) is enabled where the terminal is wide enough;
        attached, no repeat (it restarts) and no load (the form is the server's own)."""
        if action == "shown":
            shown = str(parameters[0])
            wide = self.screen.size.width >= BAR_WIDTHS.get(shown, 10**6)
            return wide and offered(shown, can_launch=self._can_launch)
        return offered(action, can_launch=self._can_launch)

    async def action_shown(self, action: str) -> None:
        """A board key pressed through its key-bar copy: as its own key."""
        await self.run_action(action)

    def action_filter(self) -> None:
        """Ask which runs to show (all, served, failed, NAME=VALUE...)."""
        suggestion = describe_view(self._board, bare=True) if self._board else ""
        grid = self.query_one(BoardGrid)
        column, row = grid.board_column, grid.cursor_row_data
        on_flag = column is not None and column.kind is ColumnKind.FLAG
        if self._table_mode and on_flag and column is not None and row is not None:
            suggestion = f"{column.name}={format_value(flag_value(row.run, column.name))}"
        ask_filter(self.app, suggestion, self._filtered)

    def _filtered(self, text: str | None) -> None:
        if text is None:
            return
        self._view = replace(self._view, filter=parse_filter(text))
        self._redraw()
        self._keep()

    def action_sort(self, descending: bool) -> None:
        """Sort by the table's cursor column (cards: the current sort column, else tok/s)."""
        if self._table_mode:
            column = self.query_one(BoardGrid).board_column
            key = column.key if column is not None else "label"
        else:
            key = self._view.sort or "metric:output_throughput"
        self._sort(key, descending=descending)

    def _sort(self, key: str, *, descending: bool) -> None:
        if key == "label" and not descending:
            self._view = replace(self._view, sort=None, descending=False)  # the runs' own order
        else:
            self._view = replace(self._view, sort=key, descending=descending)
        board = self._board
        if board is None or replace(board.view, sort=None, descending=False, selected=None) != (
            replace(self._view, sort=None, descending=False, selected=None)
        ):
            self._redraw()
        else:  # the same runs, pin and filter: the built rows reordered, none judged again
            try:
                self._board = resort_board(board, self._view)
            except BoardError:  # a sort column that is gone: _redraw drops the sort
                self._redraw()
            else:
                self._draw(self._board)
        self._keep()


def fix_hint(runs: list[RunRecord]) -> tuple[int | None, str | None]:
    """The run whose card says what ``f`` would do now, and what it says (``f``'s own choice,
    :func:`~tui.domain.fix_loop.choose_fix`)."""
    choice = choose_fix(runs)
    if choice.run is None or choice.fix is None or choice.run.diagnosis is None:
        return None, None
    number = choice.run.diagnosis.fixes.index(choice.fix) + 1
    return choice.run.id, f"f applies fix {number} and restarts"


def _shown_fields(run: RunRecord) -> tuple[object, ...]:
    """What of a run the cards and the table show (not its telemetry series or peaks)."""
    return (
        run.id,
        run.label,
        run.status,
        run.flags,
        run.startup,
        run.diagnosis,
        run.bench,
        run.workload,
        run.repro,
        run.sweep,
        run.session,
        run.exit_code,
    )
