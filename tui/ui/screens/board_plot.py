"""The board's plot: output throughput against p99 TTFT or E2EL, the Pareto frontier drawn.

The points and the frontier are the domain's (:func:`~tui.domain.board.pareto.build_scatter`):
runs measured on another workload than the baseline's are drawn apart (``x``) and never on
the frontier. Drawn with textual-plotext (plotext in a Textual widget).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static
from textual_plotext import PlotextPlot

from tui.domain.board.metrics import LATENCY_AXES
from tui.domain.board.pareto import Scatter
from tui.domain.board.view import BoardView, build_board
from tui.domain.results import RunRecord
from tui.ui.widgets.steady_footer import SteadyFooter

PLOT_WIDTH = 80
"""The width drawn for before the plot has its own (an 80-column terminal)."""
Y_AXIS_CELLS = 10  # the y axis's labels and frame take this much of the width
Y_TICK_ROWS = 3  # one y tick every three rows at most


def scatter_notes(scatter: Scatter) -> Content:
    """Under the plot: the frontier in order, which run is the baseline and which selected."""
    if not scatter.points:
        return Content.styled(
            "No served run has numbers yet: b runs a load on the ready "
            "server, and each run with a result appears here.",
            "$text-muted",
        )
    front = " → ".join(p.label for p in scatter.frontier) or "none"
    parts: list[str | tuple[str, str]] = [("frontier ", "bold $success"), front]
    base = next((p for p in scatter.points if p.is_baseline), None)
    chosen = next((p for p in scatter.points if p.is_selected), None)
    if base is not None:
        parts += ["  ·  ", ("B", "bold $accent"), f" baseline {base.label}"]
    if chosen is not None and chosen is not base:
        parts += ["  ·  ", ("S", "bold $warning"), f" selected {chosen.label}"]
    apart = [p.label for p in scatter.points if not p.comparable]
    if apart:
        parts += ["  ·  ", ("x", "$warning"), f" other load: {' '.join(apart)}"]
    return Content.assemble(*parts)


def axis_range(values: Sequence[float], share: float = 0.08) -> tuple[float, float]:
    """The range of ``values`` with a margin, so no point sits on the frame.

    Latency and throughput are never negative: the range starts at 0 at the lowest (a
    margin below a small value would put the axis's first tick below zero).
    """
    low, high = min(values), max(values)
    pad = (high - low) * share or max(abs(high) * 0.1, 1.0)
    return max(0.0, low - pad), high + pad


def tick_label(value: float) -> str:
    """A short tick label: ``0``, ``250``, ``1500``, ``12k``, ``12.5k``, ``0.25``."""
    if abs(value) >= 10_000:
        return f"{value / 1000:.3g}k"
    return f"{value:.4g}"


def fitting_count(low: float, high: float, cells: int) -> int:
    """How many x tick labels fit ``cells`` columns, each with two blank cells beside it."""
    widest = max(len(tick_label(low)), len(tick_label(high))) + 2
    return max(2, min(6, cells // widest))


def nice_ticks(low: float, high: float, most: int) -> list[float]:
    """Round ticks (1, 2 or 5 x 10^k apart) inside [low, high], at most about ``most``."""
    if not high > low:
        return [low]
    raw = (high - low) / max(most, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks: list[float] = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def draw(plot: PlotextPlot, scatter: Scatter) -> None:
    """Put ``scatter`` on ``plot`` (cleared first): the frontier, then the points, labelled."""
    plt = plot.plt
    plt.clear_figure()
    plt.xlabel(f"{scatter.latency.label} (ms)")
    plt.ylabel(scatter.throughput.label)
    points = scatter.points
    if not points:
        plot.refresh()
        return
    xs, ys = [p.latency_ms for p in points], [p.throughput for p in points]
    (x_low, x_high), (y_low, y_high) = axis_range(xs), axis_range(ys)
    plt.xlim(x_low, x_high)
    plt.ylim(y_low, y_high)
    width = plot.size.width or PLOT_WIDTH  # before the first layout: a terminal's width
    x_ticks = nice_ticks(x_low, x_high, fitting_count(x_low, x_high, width - Y_AXIS_CELLS))
    plt.xticks(x_ticks, [tick_label(v) for v in x_ticks])
    y_ticks = nice_ticks(y_low, y_high, max(2, (plot.size.height or 12) // Y_TICK_ROWS))
    plt.yticks(y_ticks, [tick_label(v) for v in y_ticks])
    front = scatter.frontier
    if len(front) > 1:
        plt.plot([p.latency_ms for p in front], [p.throughput for p in front], color="green")
    for point in points:
        marker, color = "•", "cyan"
        if point.is_baseline:
            marker, color = "B", "magenta"
        elif point.is_selected:
            marker, color = "S", "yellow"
        elif not point.comparable:
            marker, color = "x", "orange"
        plt.scatter([point.latency_ms], [point.throughput], marker=marker, color=color)
        # the label just right of its point (a marker is one cell wide)
        plt.text(
            point.label,
            point.latency_ms + (x_high - x_low) * 0.025,
            point.throughput,
            color=color,
            alignment="left",
        )
    plot.refresh()


class PlotScreen(Screen[None]):
    """The scatter of the board's served runs; ``x`` switches the latency axis."""

    DEFAULT_CSS = """
    PlotScreen #plot-title {
        height: 1; padding: 0 1; text-style: bold; text-wrap: nowrap; text-overflow: ellipsis;
    }
    PlotScreen #plot { height: 1fr; }
    PlotScreen #plot-notes { height: auto; max-height: 3; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,g,q", "close", "Close", key_display="Esc"),
        Binding("x", "switch_axis", "TTFT/E2EL"),
    ]

    def __init__(self, runs: Sequence[RunRecord], view: BoardView) -> None:
        super().__init__()
        self._runs = tuple(runs)
        self._view = view

    def compose(self) -> ComposeResult:
        """Title, plot, notes, keys."""
        yield Static("", id="plot-title")
        yield PlotextPlot(id="plot")
        yield Static("", id="plot-notes")
        yield SteadyFooter()

    def on_mount(self) -> None:
        """Draw."""
        self._draw()

    @property
    def scatter(self) -> Scatter:
        """The scatter shown (the board's runs under the board's view and this axis)."""
        return build_board(self._runs, self._view).scatter

    def _draw(self) -> None:
        board = build_board(self._runs, self._view)
        scatter = board.scatter
        title = f"{scatter.throughput.label} vs {scatter.latency.label} · {board.header()}"
        self.query_one("#plot-title", Static).update(title)
        self.query_one("#plot-notes", Static).update(scatter_notes(scatter))
        plot = self.query_one(PlotextPlot)
        plot.display = bool(scatter.points)
        draw(plot, scatter)

    def action_switch_axis(self) -> None:
        """p99 TTFT <-> p99 E2EL on the x axis."""
        axes = list(LATENCY_AXES)
        latency = axes[(axes.index(self._view.latency) + 1) % len(axes)]
        self._view = replace(self._view, latency=latency)
        self._draw()

    def action_close(self) -> None:
        """Back to the board."""
        self.dismiss(None)
