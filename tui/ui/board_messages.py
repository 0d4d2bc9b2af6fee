"""What the results board posts: the screen carries each out (the board holds no session).

Declared here to keep the board's class to its view; the board names them as its own
(``ResultsBoard.ShowDetail``...), which is how the screen's ``@on`` handlers refer to them.
"""

from __future__ import annotations

from textual.message import Message

from tui.domain.board.saved import SavedBoard
from tui.domain.board.table import Row
from tui.domain.board.view import Board
from tui.domain.results import RunRecord


class LoadIntoForm(Message):
    """The operator asked to put ``run``'s flags (and workload) into the form."""

    def __init__(self, run: RunRecord) -> None:
        super().__init__()
        self.run = run


class ShowDetail(Message):
    """The operator asked for ``row``'s run in full (``board``: as drawn)."""

    def __init__(self, board: Board, row: Row) -> None:
        super().__init__()
        self.board, self.row = board, row


class RepeatRun(Message):
    """The operator asked to run ``run`` again ``times`` times (its noise)."""

    def __init__(self, run: RunRecord, times: int) -> None:
        super().__init__()
        self.run, self.times = run, times


class ExportRun(Message):
    """The operator asked to write ``run`` as ``fmt`` (``tui.domain.export``)."""

    def __init__(self, run: RunRecord, fmt: str) -> None:
        super().__init__()
        self.run, self.fmt = run, fmt


class KeepView(Message):
    """The operator pinned, sorted, filtered or switched views: ``saved`` is what a
    relaunch (and ``vtc runs``, for the pin) should find."""

    def __init__(self, saved: SavedBoard) -> None:
        super().__init__()
        self.saved = saved
