"""The capacity curve as a plot: what is drawn, on any plotext canvas.

:func:`draw` puts a :class:`~tui.domain.capacity.CapacityAnswer` on a plotext object (the
console's ``PlotextPlot.plt``, or the ``plotext`` module itself for ``vtc capacity``'s text
plot): the predicted SLO statistic against the offered rate, its interval edges (the
band), the SLO as a horizontal line, the highest rate and the interval's edges as vertical
lines, and any real load as a marked point. With one SLO the y axis is that statistic in
ms; with several, each statistic as a percentage of its limit (the SLO line at 100).
Pure: it only calls the canvas it is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tui.domain.capacity import CapacityAnswer

Y_CEILING = 3.0
"""The y axis stops at this many times the SLO (latency grows without bound past it)."""


@dataclass(frozen=True)
class Series:
    """One line of the plot: its name, rates and values, as drawn."""

    name: str
    rates: list[float]
    values: list[float]


def series(answer: CapacityAnswer) -> tuple[list[Series], float, str]:
    """The predicted lines, the SLO line's height and the y axis's label."""
    limits = answer.slos.limits
    single = len(limits) == 1
    points = sorted(answer.curve, key=lambda p: p.rate)
    rates = [p.rate for p in points]
    out = []
    for key, limit in sorted(limits.items()):
        scale = 1.0 if single else 100.0 / limit
        out.append(Series(key, rates, [p.stats.get(key, math.nan) * scale for p in points]))
    if single:
        key, limit = next(iter(limits.items()))
        return out, limit, f"{key} (ms)"
    return out, 100.0, "% of SLO"


def draw(plt: Any, answer: CapacityAnswer, *, width: int, height: int) -> None:
    """Draw ``answer`` on ``plt`` (cleared first), ``width`` x ``height`` cells."""
    plt.clear_figure()
    lines, slo, ylabel = series(answer)
    plt.xlabel("offered rate (req/s)")
    plt.ylabel(ylabel)
    if not answer.curve:
        return
    top = slo * Y_CEILING
    error = (answer.error_pct or 0.0) / 100.0
    plt.ylim(0, top)
    plt.xlim(0, max(p.rate for p in answer.curve) * 1.02)
    for line in lines:  # the band first: the predicted line is drawn over it
        if error > 0:
            for edge in (1 + error, max(1 - error, 0.0)):
                plt.plot(
                    line.rates, [min(v * edge, top) for v in line.values], marker=".", color="gray"
                )
    for line in lines:
        shown = [min(v, top) for v in line.values]
        plt.plot(line.rates, shown, marker="braille", color="cyan", label=line.name)
    plt.hline(slo, color="red")
    if answer.max_rate > 0:
        plt.vline(answer.max_rate, color="green")
        for edge in (answer.low, answer.high):
            if edge > 0 and not math.isclose(edge, answer.max_rate):
                plt.vline(edge, color="gray")
    for load in answer.real_loads:
        ratio = max(load.stats.get(k, math.inf) / v for k, v in answer.slos.limits.items())
        y = min(ratio * slo, top)
        plt.scatter(
            [load.rate], [y], marker="o" if load.met else "x", color="green" if load.met else "red"
        )
    plt.plotsize(width, height)


def legend(answer: CapacityAnswer) -> str:
    """Under the plot: what each line is."""
    band = f"dots: ±{answer.error_pct:.0f}% interval" if answer.error_pct else "no interval"
    real = "; o/x: real loads met/missed" if answer.real_loads else ""
    return (
        f"line: predicted; {band}; red: the SLO; green: max {answer.max_rate:.3g} req/s; "
        f"grey: interval {answer.low:.3g}-{answer.high:.3g}{real}"
    )
