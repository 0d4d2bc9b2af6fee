"""The results board's commands on the selected run: its detail, Before / After against the
baseline, into the form, its command copied, repeat, export.

A mixin of :class:`~tui.ui.widgets.results_board.ResultsBoard`, kept apart from how the
board draws and keeps its view; what needs the session it posts (:mod:`tui.ui.board_messages`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.domain.board.baseline import run_label
from tui.domain.board.view import Board
from tui.domain.export.command import command_line
from tui.domain.export.launch import launch_spec
from tui.domain.results import RunRecord
from tui.ui import board_messages
from tui.ui.board_dialogs import ask_export_format, ask_repeats
from tui.ui.screen_keeper import open_screen
from tui.ui.screens.before_after import BeforeAfterScreen

# A plain mixin at run time, as BoardFrame: Textual takes the board's CSS from its widget base.
if TYPE_CHECKING:
    from textual.widget import Widget

    _Base = Widget
else:
    _Base = object


class BoardRunKeys(_Base):
    """``Enter v l y n e`` on the selected run (the board says which run that is)."""

    _board: Board | None

    def _need_selected(self) -> RunRecord | None:
        run = self.selected_run
        if run is None:
            self.notify("No run selected: the board is empty.", severity="warning")
        return run

    @property
    def selected_run(self) -> RunRecord | None:
        """The run the operator is on (the board's own)."""
        raise NotImplementedError

    def action_detail(self) -> None:
        """The selected run in full."""
        run = self._need_selected()
        board = self._board
        if run is None or board is None:
            return
        row = next(r for r in board.table.rows if r.run.id == run.id)
        self.post_message(board_messages.ShowDetail(board, row))

    def action_before_after(self) -> None:
        """Seed 003's Before / After: the baseline against the selected run."""
        run, board = self._need_selected(), self._board
        if run is None or board is None:
            return
        if board.baseline is None:
            self.notify("No baseline: nothing has served yet.", severity="warning")
            return
        if board.baseline.run.id == run.id:
            self.notify(
                f"{run_label(run)} is the baseline: select another run (or p pins "
                "one), then v compares them.",
                severity="warning",
            )
            return
        open_screen(self.app, BeforeAfterScreen(board.before_after(board.baseline.run, run)))

    def action_load_run(self) -> None:
        """Ask the screen to put the selected run's flags and workload into the form."""
        run = self._need_selected()
        if run is not None:
            self.post_message(board_messages.LoadIntoForm(run))

    def action_copy_command(self) -> None:
        """Copy the selected run's ``vllm serve`` command with OSC 52 (the terminal's
        clipboard: works over SSH and in tmux), and say so."""
        run = self._need_selected()
        if run is None:
            return
        line = command_line(launch_spec(run))
        self.app.copy_to_clipboard(line)
        self.notify(line, title=f"{run_label(run)}'s vllm serve command copied (OSC 52)")

    def action_repeat(self) -> None:
        """Ask how many times, then repeat the selected run (same flags, same workload)."""
        run = self._need_selected()
        if run is None:
            return
        label = run_label(run)
        if run.bench is None or run.workload is None:
            self.notify(
                f"{label} ran no load: n repeats a run with its flags and workload.",
                severity="warning",
            )
            return

        ask_repeats(
            self.app, label, lambda times: self.post_message(board_messages.RepeatRun(run, times))
        )

    def action_export(self) -> None:
        """Choose a format; the selected run is written under the data dir."""
        run = self._need_selected()
        if run is None:
            return
        ask_export_format(
            self.app,
            run_label(run),
            lambda fmt: self.post_message(board_messages.ExportRun(run, fmt)),
        )
