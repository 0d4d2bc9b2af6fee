"""How a server-side latency histogram's quantiles read, declared once for every display.

The console's Metrics panel and ``vtc top``'s text line both render with
:func:`latency_text`: each line labelled with its quantiles and unit, and a quantile that
the histogram cannot place (the lowest bucket, the ``+Inf`` bucket, or one bucket holding
every observation: ``LatencyQuantiles.*_bound``) read as that bucket's bound (``<300 ms``),
never as the number PromQL's interpolation makes up inside it.
"""

from __future__ import annotations

import math

from tui.domain.telemetry import LatencyQuantiles, QuantileBound

LATENCY_LABELS = (("ttft", "TTFT"), ("itl", "ITL"), ("e2el", "E2E"), ("queue", "queue"))
"""The server-side latency lines, in the order the displays show them."""


def _in_unit(value: float, seconds: bool) -> str:
    """A millisecond value as the line's unit shows it: ``85`` ms, or ``0.09``/``1.2``/``12`` s."""
    if not seconds:
        return f"{value:.0f}"
    sec = value / 1000
    if sec < 1:
        return f"{sec:.2f}"
    return f"{sec:.1f}" if sec < 10 else f"{sec:.0f}"


def quantile_text(value: float | None, bound: QuantileBound | None, seconds: bool) -> str:
    """One quantile: its number, or its bucket where the histogram cannot place it
    (``<300``, ``>10``, ``60-80``); ``-`` when there is none."""
    if bound is not None:
        if math.isinf(bound.upper):
            return f">{_in_unit(bound.lower, seconds)}"
        if bound.lower <= 0:
            return f"<{_in_unit(bound.upper, seconds)}"
        return f"{_in_unit(bound.lower, seconds)}-{_in_unit(bound.upper, seconds)}"
    return "-" if value is None else _in_unit(value, seconds)


def _quantile_forms(label: str, q: LatencyQuantiles) -> list[str]:
    """The latency line from the longest to the shortest, every number labelled."""
    readings = {name: q.reading(name) for name in ("p50", "p90", "p99")}
    largest = max(
        (b.lower if b is not None and math.isinf(b.upper) else (b.upper if b else v or 0.0))
        for v, b in readings.values()
    )
    seconds = largest >= 1000
    unit = "s" if seconds else "ms"
    text = {name: quantile_text(v, b, seconds) for name, (v, b) in readings.items()}
    bounds = [b for _, b in readings.values()]
    if bounds[0] is not None and all(b == bounds[0] for b in bounds):
        return [f"{label} p50-p99 {text['p99']} {unit}"]  # all inside one bucket: one bound
    return [
        f"{label} p50/p90/p99 {text['p50']}/{text['p90']}/{text['p99']} {unit}",
        f"{label} p50/99 {text['p50']}/{text['p99']} {unit}",
        f"{label} p99 {text['p99']} {unit}",
    ]


def latency_text(label: str, quantiles: LatencyQuantiles | None, width: int | None = None) -> str:
    """``TTFT p50/p90/p99 56/75/80 ms``, shortened to ``width`` by dropping quantiles (never
    their labels or the unit); a quantile the histogram cannot place reads as its bound
    (``queue p50-p99 <300 ms``); ``TTFT idle`` with no request in the window; ``TTFT N/A``
    where the server exports no such histogram."""
    if quantiles is None:
        return f"{label} N/A"
    if not quantiles.count:
        return f"{label} idle"
    forms = _quantile_forms(label, quantiles)
    if width is None:
        return forms[0]
    return next((form for form in forms if len(form) <= width), forms[-1])
