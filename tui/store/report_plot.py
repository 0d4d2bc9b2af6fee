"""The throughput-vs-latency scatter as inline SVG, drawn here (no library, no network).

Renders a :class:`~tui.domain.board.pareto.Scatter`: every served run as a dot (hollow when
it ran a different workload than the baseline), the Pareto frontier as a line through its
runs, the baseline as a red ring and the selected run as a green square.
"""

from __future__ import annotations

import math
from html import escape

from tui.domain.board.pareto import Scatter, ScatterPoint

WIDTH, HEIGHT = 720, 400
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 34, 50
BASELINE_COLOR = "#d62728"
SELECTED_COLOR = "#2ca02c"
FRONTIER_COLOR = "#ff7f0e"
POINT_COLOR = "#1f77b4"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (steps of 1, 2 or 5 x 10^k) covering ``[low, high]``."""
    if not math.isfinite(low) or not math.isfinite(high):
        return []
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 10))
    return ticks


#: Latencies spanning more than this ratio get a log axis, so a run 20x slower (another
#: workload, an overloaded config) does not squeeze every other run into one corner.
LOG_RATIO = 20.0


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 ticks per decade covering ``[low, high]`` (both > 0)."""
    ticks: list[float] = []
    decade = 10.0 ** math.floor(math.log10(low))
    while not ticks or ticks[-1] < high:
        ticks += [m * decade for m in (1, 2, 5)]
        decade *= 10
    first = max(i for i, t in enumerate(ticks) if t <= low)
    last = min(i for i, t in enumerate(ticks) if t >= high)
    return ticks[first : last + 1]


class _Frame:
    """Maps data coordinates into the plot area (x on a log scale for wide ranges)."""

    def __init__(self, xs: list[float], ys: list[float]) -> None:
        low = min(xs)
        self.log_x = low > 0 and max(xs) / low > LOG_RATIO
        if self.log_x:
            self.xticks = log_ticks(low, max(xs))
        else:
            self.xticks = nice_ticks(min(0.0, *xs), max(xs))
        self.yticks = nice_ticks(min(0.0, *ys), max(ys))
        self.x0, self.x1 = self.xticks[0], self.xticks[-1]
        self.y0, self.y1 = self.yticks[0], self.yticks[-1]

    def x(self, value: float) -> float:
        if self.log_x:
            span = math.log10(self.x1 / self.x0) or 1.0
            share = math.log10(value / self.x0) / span
        else:
            share = (value - self.x0) / ((self.x1 - self.x0) or 1.0)
        return _LEFT + share * (WIDTH - _LEFT - _RIGHT)

    def y(self, value: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return HEIGHT - _BOTTOM - (value - self.y0) / span * (HEIGHT - _TOP - _BOTTOM)


def _fmt(value: float) -> str:
    return f"{value:g}"


def _axes(frame: _Frame, scatter: Scatter) -> list[str]:
    parts = []
    for t in frame.xticks:
        x = frame.x(t)
        parts.append(
            f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{HEIGHT - _BOTTOM}" class="grid"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - _BOTTOM + 16}" text-anchor="middle">{_fmt(t)}</text>'
        )
    for t in frame.yticks:
        y = frame.y(t)
        parts.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{WIDTH - _RIGHT}" y2="{y:.1f}" class="grid"/>'
        )
        parts.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    scale = ", log scale" if frame.log_x else ""
    xlabel = f"{scatter.latency.label} ({scatter.latency.unit}{scale}), lower is better"
    ylabel = f"output throughput ({scatter.throughput.unit}), higher is better"
    parts.append(
        f'<text x="{(WIDTH + _LEFT) / 2:.0f}" y="{HEIGHT - 12}" text-anchor="middle">'
        f"{escape(xlabel)}</text>"
    )
    parts.append(
        f'<text transform="translate(16 {(HEIGHT + _TOP - _BOTTOM) / 2:.0f}) '
        f'rotate(-90)" text-anchor="middle">{escape(ylabel)}</text>'
    )
    return parts


def _point(frame: _Frame, p: ScatterPoint) -> list[str]:
    x, y = frame.x(p.latency_ms), frame.y(p.throughput)
    fill = POINT_COLOR if p.comparable else "none"
    stroke = FRONTIER_COLOR if p.on_frontier else POINT_COLOR
    title = f"{p.label}: {p.throughput:.1f} tok/s at {p.latency_ms:.1f} ms" + (
        "" if p.comparable else " (other load)"
    )
    parts = [
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{fill}" stroke="{stroke}" '
        f'stroke-width="2"><title>{escape(title)}</title></circle>'
    ]
    if p.is_baseline:
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="10" fill="none" '
            f'stroke="{BASELINE_COLOR}" stroke-width="2.5"/>'
        )
    if p.is_selected:
        parts.append(
            f'<rect x="{x - 8:.1f}" y="{y - 8:.1f}" width="16" height="16" fill="none" '
            f'stroke="{SELECTED_COLOR}" stroke-width="2.5"/>'
        )
    parts.append(f'<text x="{x + 9:.1f}" y="{y - 9:.1f}" class="label">{escape(p.label)}</text>')
    return parts


def _legend() -> str:
    items = [
        f'<circle cx="{_LEFT + 6}" cy="14" r="4.5" fill="{POINT_COLOR}"/>',
        f'<text x="{_LEFT + 14}" y="18">served run</text>',
        f'<circle cx="{_LEFT + 96}" cy="14" r="4.5" fill="none" stroke="{POINT_COLOR}"/>',
        f'<text x="{_LEFT + 104}" y="18">other load</text>',
        f'<line x1="{_LEFT + 180}" y1="14" x2="{_LEFT + 204}" y2="14" '
        f'stroke="{FRONTIER_COLOR}" stroke-width="2.5"/>',
        f'<text x="{_LEFT + 210}" y="18">Pareto frontier</text>',
        f'<circle cx="{_LEFT + 320}" cy="14" r="8" fill="none" stroke="{BASELINE_COLOR}" '
        'stroke-width="2.5"/>',
        f'<text x="{_LEFT + 332}" y="18">baseline</text>',
        f'<rect x="{_LEFT + 396}" y="7" width="14" height="14" fill="none" '
        f'stroke="{SELECTED_COLOR}" stroke-width="2.5"/>',
        f'<text x="{_LEFT + 416}" y="18">selected</text>',
    ]
    return "".join(items)


def scatter_svg(scatter: Scatter) -> str:
    """The scatter as one ``<svg>`` element (inline: no external references)."""
    # inline SVG in HTML needs no xmlns: the page carries no URL at all
    head = (
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="output throughput against {escape(scatter.latency.label)}">'
    )
    if not scatter.points:
        return (
            head + f'<text x="{WIDTH / 2:.0f}" y="{HEIGHT / 2:.0f}" text-anchor="middle">'
            "no served run has both numbers yet</text></svg>"
        )
    frame = _Frame([p.latency_ms for p in scatter.points], [p.throughput for p in scatter.points])
    parts = [head, _legend(), *_axes(frame, scatter)]
    front = scatter.frontier
    if len(front) > 1:
        coords = " ".join(f"{frame.x(p.latency_ms):.1f},{frame.y(p.throughput):.1f}" for p in front)
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{FRONTIER_COLOR}" '
            'stroke-width="2.5"/>'
        )
    for p in scatter.points:
        parts += _point(frame, p)
    parts.append("</svg>")
    return "".join(parts)
