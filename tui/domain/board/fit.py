"""Fitting the board's plain-text table into a terminal's width (``vtc runs``).

A board is as wide as its flags and metrics: twelve columns of deltas make 240-column rows
that wrap into noise on an 80-column terminal. :func:`fit_grid` narrows it in steps, each
only as far as needed: flag titles abbreviated (``gpu_memory_utilization`` ->
``gpu_mem_util``), a failed run's state cut to its status (its cause is listed under the
table), long text cells ended with an ellipsis, then whole columns left out from the right
(the last metrics first, the objective ones, the verdict and the run's change last; the run
and its state always stay). What was left out is named, and
``vtc runs --wide`` prints every column at full width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tui.domain.board.metrics import HEADLINE_METRICS
from tui.domain.board.short_names import short_title
from tui.domain.board.table import Column, ColumnKind

__all__ = ["FittedGrid", "fit_grid", "short_title"]

GAP = 2  # blanks between columns
TEXT_CAP = 16  # longest flag or workload value kept whole once the table must narrow
ELLIPSIS = "…"


@dataclass(frozen=True)
class FittedGrid:
    """The header row and cells kept (as text), their columns, and the titles left out."""

    columns: tuple[Column, ...]
    grid: tuple[tuple[str, ...], ...]
    dropped: tuple[str, ...] = ()


def _cut(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[: cap - 1] + ELLIPSIS


def _total(grid: Sequence[Sequence[str]]) -> int:
    if not grid or not grid[0]:
        return 0
    widths = [max(len(row[i]) for row in grid) for i in range(len(grid[0]))]
    return sum(widths) + GAP * (len(widths) - 1)


def _narrowed(columns: Sequence[Column], grid: list[list[str]]) -> list[list[str]]:
    """Titles abbreviated, states cut to their status, long text ended with an ellipsis."""
    out = [list(row) for row in grid]
    for i, column in enumerate(columns):
        if column.kind in (ColumnKind.FLAG, ColumnKind.WORKLOAD):
            out[0][i] = short_title(out[0][i])
            for row in out[1:]:
                row[i] = _cut(row[i], TEXT_CAP)
        elif column.kind is ColumnKind.STATE:
            for row in out[1:]:
                row[i] = row[i].split(":", 1)[0]  # "failed: kv_cache_too_small": causes below
    return out


def fit_grid(columns: Sequence[Column], grid: Sequence[Sequence[str]], width: int) -> FittedGrid:
    """``grid`` (header row first) narrowed to ``width`` characters, as far as it goes."""
    cols = list(columns)
    rows = [list(row) for row in grid]
    if _total(rows) <= width:
        return FittedGrid(tuple(cols), tuple(tuple(r) for r in rows))
    rows = _narrowed(cols, rows)
    dropped: list[str] = []
    # The run and its state always stay; the other metrics go first (rightmost first), then
    # flags, then the objective metrics and the run's change (what the board is for).
    for drop in (_minor_metric, _detail, _headline):
        for i in range(len(cols) - 1, -1, -1):
            if _total(rows) <= width:
                break
            if drop(cols[i]) and _keeps_one(cols, i):
                dropped.insert(0, cols[i].title)
                del cols[i]
                for row in rows:
                    del row[i]
    return FittedGrid(tuple(cols), tuple(tuple(r) for r in rows), tuple(dropped))


def _minor_metric(column: Column) -> bool:
    if column.kind is ColumnKind.PREDICTED:
        return True
    return column.kind is ColumnKind.METRIC and column.metric not in HEADLINE_METRICS


def _detail(column: Column) -> bool:
    return column.kind in (ColumnKind.WORKLOAD, ColumnKind.SWEEP, ColumnKind.FLAG)


def _headline(column: Column) -> bool:
    return column.kind in (ColumnKind.METRIC, ColumnKind.VERDICT, ColumnKind.CHANGE)


def _keeps_one(columns: Sequence[Column], index: int) -> bool:
    """Whether leaving out ``columns[index]`` keeps a metric (the board's point) in view."""
    if columns[index].kind is not ColumnKind.METRIC:
        return True
    return sum(1 for c in columns if c.kind is ColumnKind.METRIC) > 1
