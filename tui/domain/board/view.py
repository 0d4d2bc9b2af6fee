"""One board: the runs, the baseline, the groups of repeats, the table and the scatter.

:func:`build_board` is what every surface calls: the console after each change, ``vtc
runs``, ``vtc report``. A :class:`BoardView` holds the operator's choices (pin, sort,
filter, latency axis, selection), so a widget keeps a view and re-renders the board.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tui.domain.board.baseline import NO_BASELINE, Baseline, choose_baseline, run_label
from tui.domain.board.before_after import BeforeAfter, before_after
from tui.domain.board.noise import Groups
from tui.domain.board.pareto import Scatter, build_scatter
from tui.domain.board.redact import without_secret_args
from tui.domain.board.table import BoardError, BoardTable, RowFilter, build_table
from tui.domain.results import RunRecord


@dataclass(frozen=True)
class BoardView:
    """The operator's choices: all optional.

    ``pinned``: the baseline's run id (default: :func:`~.baseline.choose_baseline`);
    ``session``: the current session (default: the newest run's); ``sort``: a column key
    (``metric:output_throughput``, ``flag:max_num_seqs``, ``state``...); ``latency``:
    ``ttft`` or ``e2el`` for the plot; ``selected``: the run id the operator is on.
    """

    pinned: int | None = None
    session: str | None = None
    sort: str | None = None
    descending: bool = False
    filter: RowFilter = field(default_factory=RowFilter)
    latency: str = "ttft"
    selected: int | None = None


@dataclass(frozen=True)
class Board:
    """Everything the board shows for one list of runs (oldest first)."""

    runs: tuple[RunRecord, ...]
    view: BoardView
    baseline: Baseline | None
    groups: Groups
    table: BoardTable
    scatter: Scatter
    unsorted: BoardTable = field(compare=False, repr=False)
    """The table in the runs' own order (:func:`resort_board` reorders it, judging nothing)."""

    def find(self, ref: str | int) -> RunRecord:
        """A run by id (``7``), label (``#7``, ``attached``) or ``last``; :class:`BoardError`."""
        return find_run(self.runs, ref)

    def before_after(
        self, before: RunRecord | str | int, after: RunRecord | str | int
    ) -> BeforeAfter:
        """Seed 003's table for two runs (records, ids or labels); noise from this board."""
        first = before if isinstance(before, RunRecord) else self.find(before)
        second = after if isinstance(after, RunRecord) else self.find(after)
        return before_after(first, second, groups=self.groups)

    def header(self) -> str:
        """``7 runs · vs #3 (pinned)``: the line above the table."""
        shown = len(self.table.rows)
        count = f"{shown} of {len(self.runs)} runs" if shown != len(self.runs) else f"{shown} runs"
        if self.baseline is None:
            return f"{count} · {NO_BASELINE}"
        note = f" · {self.baseline.note}" if self.baseline.note else ""
        return f"{count} · {self.baseline.header()}{note}"


def build_board(runs: Sequence[RunRecord], view: BoardView | None = None) -> Board:
    """The board of ``runs`` (oldest first) under ``view``; :class:`BoardError` on a bad sort."""
    view = view or BoardView()
    # a secret typed into a run's extra arguments is never shown, whatever renders the board
    runs = tuple(without_secret_args(r) for r in runs)
    baseline = choose_baseline(runs, pinned=view.pinned, session=view.session)
    base_run = baseline.run if baseline is not None else None
    groups = Groups(runs)
    unsorted = build_table(runs, baseline=base_run, groups=groups, row_filter=view.filter)
    table, scatter = _arranged(unsorted, view, base_run)
    return Board(runs, view, baseline, groups, table, scatter, unsorted)


def _arranged(
    unsorted: BoardTable, view: BoardView, base_run: RunRecord | None
) -> tuple[BoardTable, Scatter]:
    """The built table in ``view``'s order and the scatter of its rows."""
    table = unsorted.sorted_by(view.sort, descending=view.descending) if view.sort else unsorted
    scatter = build_scatter(
        [r.run for r in table.rows],
        latency=view.latency,
        baseline=base_run,
        selected=view.selected,
    )
    return table, scatter


def resort_board(board: Board, view: BoardView) -> Board:
    """``board`` under ``view``, a view that differs from the board's own only in its sort
    (and selection): the rows of the built table reordered, no run judged or measured
    again (the same board as :func:`build_board` gives; :class:`BoardError` on a bad sort)."""
    base_run = board.baseline.run if board.baseline is not None else None
    table, scatter = _arranged(board.unsorted, view, base_run)
    return replace(board, view=view, table=table, scatter=scatter)


def find_run(runs: Sequence[RunRecord], ref: str | int) -> RunRecord:
    """A run by id, ``#id``, label or ``last``; :class:`BoardError` naming what exists."""
    text = str(ref).strip()
    if not runs:
        raise BoardError(f"no run {text!r}: the history is empty")
    if text.lower() in ("last", "latest"):
        return runs[-1]
    digits = text.removeprefix("#")
    for run in runs:
        if (digits.isdigit() and run.id == int(digits)) or run_label(run) == text:
            return run
    first, last = run_label(runs[0]), run_label(runs[-1])
    raise BoardError(f"no run {text!r} in the history", hint=f"runs {first} to {last}, or last")
