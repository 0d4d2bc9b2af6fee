"""A run's telemetry over time as small charts (one sparkline per series).

The points are the run's :attr:`~tui.domain.results.RunRecord.series` (downsampled by the
telemetry hub while the run lived). A series with no value at all is left out; a run with
no points says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Sparkline, Static

from tui.domain.telemetry import SeriesPoint
from tui.ui.format import GIB

NO_SAMPLES = "no samples: telemetry over time was not recorded for this run"


@dataclass(frozen=True)
class Chart:
    """One series: its name, how to read it from a point, how to print a value."""

    label: str
    read: Callable[[SeriesPoint], float | None]
    unit: Callable[[float], str]


CHARTS: tuple[Chart, ...] = (
    Chart(
        "KV cache %",
        lambda p: None if p.kv_cache_usage is None else p.kv_cache_usage * 100,
        lambda v: f"{v:.0f}%",
    ),
    Chart("running", lambda p: p.num_running, lambda v: f"{v:.0f}"),
    Chart("waiting", lambda p: p.num_waiting, lambda v: f"{v:.0f}"),
    Chart("out tok/s", lambda p: p.generation_tokens_per_s, lambda v: f"{v:.0f}"),
    Chart("in tok/s", lambda p: p.prompt_tokens_per_s, lambda v: f"{v:.0f}"),
    Chart(
        "GPU mem GiB",
        lambda p: None if p.gpu_mem_used_bytes is None else p.gpu_mem_used_bytes / GIB,
        lambda v: f"{v:.1f}",
    ),
    Chart("GPU util %", lambda p: p.gpu_util, lambda v: f"{v:.0f}%"),
)


def chart_rows(series: Sequence[SeriesPoint]) -> list[tuple[Chart, list[float]]]:
    """The charts that have values in ``series``, with their values in time order."""
    rows = []
    for chart in CHARTS:
        values = [v for v in (chart.read(p) for p in series) if v is not None]
        if values:
            rows.append((chart, values))
    return rows


def chart_label(chart: Chart, values: Sequence[float]) -> str:
    """``KV cache %   12%–87%``: the series' name and its range."""
    low, high = min(values), max(values)
    shown = chart.unit(high) if low == high else f"{chart.unit(low)}–{chart.unit(high)}"
    return f"{chart.label:<12}{shown:>14}"


class SeriesCharts(Vertical):
    """Small charts of a run's telemetry series, or "no samples"."""

    DEFAULT_CSS = """
    SeriesCharts { height: auto; }
    SeriesCharts .chart-row { height: 1; }
    SeriesCharts .chart-label { width: 28; color: $text-muted; }
    SeriesCharts Sparkline { width: 1fr; }
    SeriesCharts .chart-axis { color: $text-muted; }
    """

    def __init__(self, series: Sequence[SeriesPoint], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._series = tuple(series)

    def compose(self) -> ComposeResult:
        """One row per series that has values, then the time span."""
        rows = chart_rows(self._series)
        if not rows:
            yield Static(NO_SAMPLES, classes="chart-axis")
            return
        for chart, values in rows:
            with Horizontal(classes="chart-row"):
                yield Static(chart_label(chart, values), classes="chart-label")
                yield Sparkline(values, summary_function=max)
        first, last = self._series[0].t, self._series[-1].t
        yield Static(
            f"{len(self._series)} points from {first:.0f}s to {last:.0f}s after launch",
            classes="chart-axis",
        )
