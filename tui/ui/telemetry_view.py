"""Short renderings of telemetry for the panels: freshness marks, latency lines, sparklines.

Display only: the numbers and their states come from the session (``TelemetryStatus``,
the samples, the history); these functions only decide how they read in a few cells.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tui.domain.freshness import Freshness
from tui.domain.history import TelemetryHistory
from tui.domain.telemetry import SourceStatus

SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


def spark(values: Sequence[float], width: int, *, floor: float | None = 0.0) -> str:
    """``values`` as a sparkline ``width`` cells wide (the newest at the right).

    Longer series are averaged into ``width`` buckets; the scale runs from ``floor`` (the
    data's minimum when ``None``) to the data's maximum. Empty with fewer than two points
    (no trend to draw).
    """
    data = [v for v in values if math.isfinite(v)]
    if width < 2 or len(data) < 2:  # one point is no trend
        return ""
    if len(data) > width:
        step = len(data) / width
        data = [
            sum(chunk) / len(chunk)
            for i in range(width)
            if (chunk := data[int(i * step) : max(int((i + 1) * step), int(i * step) + 1)])
        ]
    low = min(data) if floor is None else min(floor, min(data))
    high = max(data)
    if high <= low:
        return SPARK_BLOCKS[0] * len(data)
    top = len(SPARK_BLOCKS) - 1
    return "".join(SPARK_BLOCKS[round((v - low) / (high - low) * top)] for v in data)


def recent_values(history: TelemetryHistory, name: str, seconds: float) -> list[float]:
    """The values of one history number over its newest ``seconds``, oldest first."""
    ring = history.ring(name)
    latest = ring.latest
    if latest is None:
        return []
    return [value for _, value in ring.since(latest[0] - seconds)]


def age_text(seconds: float | None) -> str:
    """An age in a few cells: ``0.8s``, ``12s``, ``3m``."""
    if seconds is None:
        return "?"
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}m"


def freshness_mark(fresh: Freshness | None) -> str:
    """The mark a panel's title carries (Textual markup): its data's age, or its state."""
    if fresh is None:
        return ""
    if fresh.state is SourceStatus.OK:  # no age: a state that holds (a released GPU)
        return f"[$text-muted]{age_text(fresh.age_s)}[/]" if fresh.age_s is not None else ""
    if fresh.state is SourceStatus.STALE:
        if fresh.age_s is None:
            return "[$text-muted]waiting[/]"
        return f"[b $warning]STALE {age_text(fresh.age_s)}[/]"
    if fresh.state is SourceStatus.DOWN:
        return "[b $error]DOWN[/]"
    return ""  # unavailable: the panel's body says why


def panel_title(name: str, fresh: Freshness | None, note: str = "") -> str:
    """A panel's border title: ``GPU (WSL2) · 0.8s``, ``Metrics · STALE 5s``."""
    head = f"{name} {note}".rstrip()
    mark = freshness_mark(fresh)
    return f"{head} · {mark}" if mark else head


def ms(value: float | None) -> str:
    """Milliseconds in three or four cells: ``85``, ``940``, ``1.2s``, ``12s``."""
    if value is None:
        return "-"
    if value < 1000:
        return f"{value:.0f}"
    return f"{value / 1000:.1f}s" if value < 10_000 else f"{value / 1000:.0f}s"


def fit(parts: Sequence[tuple[str, int]], width: int, sep: str = " ") -> str:
    """Join the parts that fit ``width``, dropping the least important first.

    ``parts``: ``(text, importance)`` in display order; a higher importance stays longer.
    Empty texts are skipped. The most important part is kept even when it alone is too long.
    """
    kept = [(i, text, rank) for i, (text, rank) in enumerate(parts) if text]
    while len(kept) > 1 and len(sep.join(text for _, text, _ in kept)) > width:
        drop = min(kept, key=lambda item: (item[2], -item[0]))
        kept.remove(drop)
    return sep.join(text for _, text, _ in kept)


def wrap(text: str, width: int, max_lines: int) -> list[str]:
    """``text`` wrapped to ``width`` in at most ``max_lines`` lines (the last one cut with ...)."""
    width = max(width, 8)
    words = text.split()
    lines: list[str] = []
    current = ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if len(candidate) <= width:
            current = candidate
            continue
        if current:
            lines.append(current)
        current = word
        while len(current) > width:
            lines.append(current[:width])
            current = current[width:]
    if current:
        lines.append(current)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: max(width - 1, 1)].rstrip() + "…"
    return lines
