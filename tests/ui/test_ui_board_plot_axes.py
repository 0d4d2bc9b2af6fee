"""The board plot's axes: they start at 0 at the lowest and their tick labels never touch."""

from __future__ import annotations

import re

from fakes.runs import served_run
from textual_plotext import PlotextPlot

from tui.domain.board.view import BoardView, build_board
from tui.ui.screens.board_plot import axis_range, draw, fitting_count, nice_ticks, tick_label


def test_a_range_near_zero_is_clamped_at_zero() -> None:
    low, high = axis_range([5.0, 3000.0])
    assert low == 0.0 and high > 3000.0
    assert axis_range([0.5])[0] == 0.0  # one point: its margin never goes below zero


def test_ticks_are_round_inside_the_range_and_as_many_as_fit() -> None:
    for low, high, cells in ((0.0, 3240.0, 66), (0.0, 0.9, 30), (12.0, 95_000.0, 40)):
        ticks = nice_ticks(low, high, fitting_count(low, high, cells))
        assert len(ticks) >= 2 and all(low <= t <= high for t in ticks), ticks
        widths = sum(len(tick_label(t)) + 2 for t in ticks)
        assert widths <= max(cells, 2 * (len(tick_label(high)) + 2)), (ticks, cells)


def _x_tick_line(text: str) -> str:
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.splitlines()]
    frame = max(i for i, line in enumerate(lines) if "└" in line)
    return lines[frame + 1]


def test_the_drawn_x_axis_has_no_negative_tick_and_separated_labels() -> None:
    runs = [
        served_run(1, tput=820.0, ttft_p99=4.0),
        served_run(2, tput=1400.0, ttft_p99=1850.0, max_num_seqs=64),
        served_run(3, tput=1010.0, ttft_p99=3100.0, max_num_seqs=128),
    ]
    scatter = build_board(runs, BoardView()).scatter
    plot = PlotextPlot()
    plot.plt.plot_size(76, 18)
    draw(plot, scatter)
    line = _x_tick_line(plot.plt.build())
    labels = line.split()
    assert labels and not any(label.startswith("-") for label in labels), line
    assert "0" in labels  # the axis starts at zero
    assert len(labels) <= 6 and "  " in line.strip()  # few ticks, blanks between them
