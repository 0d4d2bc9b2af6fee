"""One run in full: the whole card, its startup profile, telemetry over time, its server log.

A full screen that scrolls by keyboard (Up/Down, PgUp/PgDn, Home/End) at 80x24. The log is
the file the run's server wrote (``RunRecord.log_path``), read off the event loop by the
session and bounded to its last lines.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static

from tui.domain.board.table import Row
from tui.domain.board.view import Board
from tui.domain.errors import one_line
from tui.domain.log_tail import LogTail
from tui.session.port import SessionTools
from tui.ui.format import inert_rendering, plain
from tui.ui.run_detail_text import (
    failure_lines,
    flag_lines,
    metric_lines,
    peak_lines,
    repro_lines,
    section,
    startup_lines,
    summary_lines,
)
from tui.ui.widgets.key_bar import KeyBar
from tui.ui.widgets.run_card import CardContext, card_heading
from tui.ui.widgets.series_charts import SeriesCharts

LOADING = "reading the log file…"


@inert_rendering
def detail_content(board: Board, row: Row) -> Content:
    """The run's card in full: state, flags, failure, numbers, peaks, reproduction."""
    baseline = board.baseline.label if board.baseline is not None else None
    run = row.run
    lines = [*summary_lines(row, baseline), Content(""), section("Flags")]
    lines += flag_lines(row)
    failure = failure_lines(run)
    if failure:
        lines += [Content(""), section("Why it failed"), *failure]
    if run.bench is not None:
        lines += [Content(""), section(f"Numbers (vs {baseline or 'no baseline'})")]
        lines += metric_lines(row, board.table.columns)
        lines += peak_lines(run)
    lines += [Content(""), section("Reproduce"), *repro_lines(run)]
    return Content("\n").join(lines)


def log_content(tail: LogTail) -> Content:
    """The log lines under a note saying what they are."""
    lines = [Content.styled(tail.note, "$text-muted")] if tail.note else []
    lines += [Content(line) for line in tail.lines]
    return Content("\n").join(lines) if lines else Content.styled("(empty)", "$text-muted")


class RunDetailScreen(Screen[None]):
    """The selected run in full; Esc, Enter or q goes back to the board."""

    DEFAULT_CSS = """
    RunDetailScreen #detail-title { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    RunDetailScreen #detail { padding: 0 1; scrollbar-size-vertical: 1; }
    RunDetailScreen .detail-section { text-style: bold; color: $text-primary; margin-top: 1; }
    RunDetailScreen #detail-log { color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,enter", "close", "Back", key_display="Esc"),
    ]

    def __init__(self, board: Board, row: Row, tools: SessionTools) -> None:
        super().__init__()
        self._board = board
        self._row = row
        self._tools = tools

    def compose(self) -> ComposeResult:
        """Card, startup profile, charts, log: one scrolling column."""
        run = self._row.run
        heading = plain(f"{card_heading_for(self._board, self._row)} · in full")
        yield Static(heading, id="detail-title")
        with VerticalScroll(id="detail"):
            yield Static(detail_content(self._board, self._row), id="detail-card")
            yield Static("Startup profile", classes="detail-section")
            yield Static(Content("\n").join(startup_lines(run)), id="detail-startup")
            yield Static("Telemetry over time", classes="detail-section")
            yield SeriesCharts(run.series, id="detail-charts")
            yield Static("Server log", classes="detail-section")
            yield Static(LOADING, id="detail-log")
        yield KeyBar()

    def on_mount(self) -> None:
        """Title, focus the scroller, read the log in a worker."""
        self.query_one("#detail", VerticalScroll).focus()
        self.run_worker(self._read_log(), group="detail-log", exit_on_error=False)

    async def _read_log(self) -> None:
        try:
            tail = await self._tools.log_tail(self._row.run)
        except Exception as exc:  # a log that cannot be read must not break the view
            tail = LogTail((), f"cannot read the log: {one_line(exc)}")
        self.query_one("#detail-log", Static).update(log_content(tail))

    def action_close(self) -> None:
        """Back to the board."""
        self.dismiss(None)


def card_heading_for(board: Board, row: Row) -> str:
    """The card's title (``#3 vs #1``) for the screen's header."""
    baseline = board.baseline.label if board.baseline is not None else None
    return card_heading(CardContext(row, board.table.columns, baseline))
