"""Throughput against a chosen latency for every served run, and its Pareto frontier.

A run is on the frontier when no other run has at least its throughput at no more than its
latency with one of the two strictly better (higher throughput, lower latency). The
frontier is drawn over the runs that compare like for like with the baseline (same
workload and machine, :mod:`.noise`); the others are plotted but never on it, since their
numbers measure something else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tui.domain.board.baseline import run_label, same_run
from tui.domain.board.metrics import LATENCY_AXES, OUTPUT_THROUGHPUT, MetricSpec
from tui.domain.board.noise import like_for_like
from tui.domain.results import RunRecord


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the ``(latency, throughput)`` points no other point dominates.

    Lower latency and higher throughput are better. Identical points are all kept. The
    result is ordered by latency (ties: higher throughput first), so it draws as a line.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front: list[int] = []
    best_y = -math.inf
    best_x = math.inf  # latency at which best_y was first reached
    for i in order:
        x, y = points[i]
        if y > best_y:
            front.append(i)
            best_y, best_x = y, x
        elif y == best_y and x == best_x:
            front.append(i)  # the same point again: neither dominates the other
    return front


@dataclass(frozen=True)
class ScatterPoint:
    """One served run on the plot."""

    run: RunRecord
    label: str
    latency_ms: float
    throughput: float
    on_frontier: bool = False
    is_baseline: bool = False
    is_selected: bool = False
    comparable: bool = True  # like for like with the baseline


@dataclass(frozen=True)
class Scatter:
    """The plot's model: axes, points, and the frontier ordered by latency."""

    latency: MetricSpec
    throughput: MetricSpec
    points: tuple[ScatterPoint, ...]

    @property
    def frontier(self) -> tuple[ScatterPoint, ...]:
        """The frontier's points, lowest latency first."""
        on = [p for p in self.points if p.on_frontier]
        return tuple(sorted(on, key=lambda p: (p.latency_ms, -p.throughput)))


def build_scatter(
    runs: Sequence[RunRecord],
    *,
    latency: str = "ttft",
    baseline: RunRecord | None = None,
    selected: int | None = None,
) -> Scatter:
    """The scatter of ``runs`` that served and have both numbers (``latency``: ttft/e2el)."""
    if latency not in LATENCY_AXES:
        raise ValueError(f"latency axis {latency!r}: choose from {', '.join(LATENCY_AXES)}")
    axis = LATENCY_AXES[latency]
    raw: list[ScatterPoint] = []
    for run in runs:
        x, y = axis.value(run), OUTPUT_THROUGHPUT.value(run)
        if not run.served or x is None or y is None or not math.isfinite(x + y):
            continue
        raw.append(
            ScatterPoint(
                run=run,
                label=run_label(run),
                latency_ms=x,
                throughput=y,
                is_baseline=baseline is not None and same_run(run, baseline),
                is_selected=selected is not None and run.id == selected,
                comparable=baseline is None or like_for_like(run, baseline).ok,
            )
        )
    candidates = [i for i, p in enumerate(raw) if p.comparable]
    front = pareto_front([(raw[i].latency_ms, raw[i].throughput) for i in candidates])
    on = {candidates[j] for j in front}
    points = tuple(replace(p, on_frontier=i in on) for i, p in enumerate(raw))
    return Scatter(axis, OUTPUT_THROUGHPUT, points)
