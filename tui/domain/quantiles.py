"""Server-side latency quantiles from vLLM's /metrics histograms, as Prometheus computes them.

``bucket_quantile`` is PromQL's ``histogram_quantile`` for classic histograms
(prometheus/promql/quantile.go ``BucketQuantile``): buckets sorted by upper bound, equal
bounds merged, counts forced monotonic, the rank ``q * count`` located with a binary search,
then linear interpolation inside the bucket it falls in, from 0 for the lowest bucket (when
its bound is positive). A rank in the ``+Inf`` bucket returns the highest finite bound: the
quantile is "at least" that, never an invented number.

A window's histogram is the sum of the per-scrape increases inside it, each increase taken
as ``increase()`` does across a counter reset: when the server restarted (the ``_created``
stamp changed, a bucket went down, or the bucket layout changed) the increase is the new
value itself, the old counts are not subtracted. No extrapolation to the window's edges is
made: quantiles are ratios of counts, and Prometheus' extrapolation scales every bucket
alike in the common case.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Mapping

from tui.domain.telemetry import Histogram, LatencyQuantiles, QuantileBound, ServerLatency

# PromQL's smallDeltaTolerance: bucket counts that differ by less than this relative amount
# are taken as equal (floating-point noise from rate()), not as a non-monotonic histogram.
SMALL_DELTA_TOLERANCE = 1e-12
LATENCY_FIELDS = ("ttft", "itl", "e2el", "queue", "prefill", "decode")
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
DEFAULT_WINDOW_S = 60.0


def histogram_from_buckets(
    buckets: Iterable[tuple[float, float]], total: float = 0.0, created: float | None = None
) -> Histogram:
    """A ``Histogram`` from ``(upper bound, cumulative count)`` pairs in any order.

    Pairs with the same bound are merged (summed), as PromQL's ``coalesceBuckets`` does when
    several series (one per engine) are summed by ``le``.
    """
    merged: dict[float, float] = {}
    for bound, count in buckets:
        merged[bound] = merged.get(bound, 0.0) + count
    bounds = tuple(sorted(merged))
    return Histogram(bounds, tuple(merged[b] for b in bounds), total, created)


def _monotonic(counts: Iterable[float]) -> list[float]:
    """PromQL's ensureMonotonicAndIgnoreSmallDeltas: a count below the one before it is
    raised to it (scrapes of buckets are not atomic); tiny relative differences vanish."""
    out: list[float] = []
    previous = 0.0
    for count in counts:
        if out and math.isclose(count, previous, rel_tol=SMALL_DELTA_TOLERANCE, abs_tol=0.0):
            count = previous
        count = max(count, previous)
        out.append(count)
        previous = count
    return out


def bucket_quantile(q: float, hist: Histogram) -> float | None:
    """The ``q``-quantile (0-1) of ``hist`` in its own unit; ``None`` where PromQL gives NaN.

    NaN cases: no ``+Inf`` bucket, fewer than two buckets, no observations, ``q`` NaN.
    ``q < 0`` gives ``-inf`` and ``q > 1`` gives ``+inf``, as in PromQL.
    """
    if math.isnan(q):
        return None
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if not hist.well_formed or len(hist.bounds) < 2:
        return None
    bounds = hist.bounds
    counts = _monotonic(hist.counts)
    observations = counts[-1]
    if observations <= 0:
        return None
    rank = q * observations
    # sort.Search(len-1, counts[i] >= rank): the first bucket, +Inf excluded, reaching rank.
    b = bisect.bisect_left(counts, rank, 0, len(counts) - 1)
    if b == len(counts) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count)


def quantile_bound(q: float, hist: Histogram) -> QuantileBound | None:
    """The bucket the ``q``-quantile falls in when interpolating inside it invents the value.

    That is: the lowest bucket (PromQL interpolates from 0, so every observation near 0
    reads as half the bound), the ``+Inf`` bucket (``bucket_quantile`` returns the highest
    finite bound: "at least"), and a bucket that holds every observation (p50, p90 and p99
    then only spread the bucket evenly). ``None`` where ``bucket_quantile`` is as good as
    the histogram allows (or gives no value at all).
    """
    if math.isnan(q) or not 0 <= q <= 1 or not hist.well_formed or len(hist.bounds) < 2:
        return None
    counts = _monotonic(hist.counts)
    observations = counts[-1]
    if observations <= 0:
        return None
    b = bisect.bisect_left(counts, q * observations, 0, len(counts) - 1)
    bounds = hist.bounds
    if b == len(counts) - 1:
        return QuantileBound(lower=bounds[-2], upper=math.inf)
    lower = bounds[b - 1] if b > 0 else 0.0
    below = counts[b - 1] if b > 0 else 0.0
    if b == 0 or counts[b] - below >= observations:
        return QuantileBound(lower=lower, upper=bounds[b])
    return None


def bucket_around(hist: Histogram, value: float) -> tuple[float, float]:
    """The bounds ``(lower, upper]`` of the bucket of ``hist`` that ``value`` falls in.

    The resolution of any quantile read from this histogram at ``value``.
    """
    i = bisect.bisect_left(hist.bounds, value)
    i = min(i, len(hist.bounds) - 1)
    lower = hist.bounds[i - 1] if i > 0 else 0.0
    return lower, hist.bounds[i]


def largest_observed(hist: Histogram | None) -> float | None:
    """An upper bound on the largest value observed: the bound of the highest non-empty
    finite bucket (``inf`` if observations fell past every finite bound; ``None`` if none)."""
    if hist is None or hist.count <= 0:
        return None
    previous = 0.0
    largest = None
    for bound, count in zip(hist.bounds, hist.counts, strict=True):
        if count > previous:
            largest = bound
        previous = max(previous, count)
    return largest


def restarted(current: Histogram, previous: Histogram) -> bool:
    """Whether ``current`` belongs to a histogram that began again since ``previous``."""
    if current.bounds != previous.bounds:  # a new layout (--custom-histogram-buckets)
        return True
    stamped = current.created is not None and previous.created is not None
    if stamped and current.created != previous.created:
        return True
    return any(c < p for c, p in zip(current.counts, previous.counts, strict=True)) or (
        current.sum < previous.sum
    )


def increase(current: Histogram, previous: Histogram | None) -> Histogram | None:
    """The observations made between two scrapes; ``None`` for a first scrape.

    Across a restart the increase is ``current`` itself (what ``increase()`` counts for a
    reset counter: everything since the reset).
    """
    if previous is None:
        return None
    if restarted(current, previous):
        return current
    return Histogram(
        current.bounds,
        tuple(c - p for c, p in zip(current.counts, previous.counts, strict=True)),
        current.sum - previous.sum,
        current.created,
    )


def _add(a: Histogram | None, b: Histogram) -> Histogram:
    if a is None:
        return b
    if a.bounds != b.bounds:  # layouts changed inside the window: the newer one wins
        return b
    return Histogram(
        a.bounds,
        tuple(x + y for x, y in zip(a.counts, b.counts, strict=True)),
        a.sum + b.sum,
        b.created,
    )


def quantiles_ms(hist: Histogram | None, scale: float = 1000.0) -> LatencyQuantiles | None:
    """p50/p90/p99, count and mean of a seconds histogram, in milliseconds.

    ``None`` when there is no histogram at all (the server does not export it); an empty one
    gives ``count=0`` and no quantiles.
    """
    if hist is None:
        return None
    count = hist.count
    values = {name: bucket_quantile(q, hist) for name, q in QUANTILES}
    bounds = {name: quantile_bound(q, hist) for name, q in QUANTILES}
    return LatencyQuantiles(
        p50=None if values["p50"] is None else values["p50"] * scale,
        p90=None if values["p90"] is None else values["p90"] * scale,
        p99=None if values["p99"] is None else values["p99"] * scale,
        count=count,
        mean=hist.sum / count * scale if count > 0 else None,
        p50_bound=_scaled(bounds["p50"], scale),
        p90_bound=_scaled(bounds["p90"], scale),
        p99_bound=_scaled(bounds["p99"], scale),
    )


def _scaled(bound: QuantileBound | None, scale: float) -> QuantileBound | None:
    if bound is None:
        return None
    return QuantileBound(lower=bound.lower * scale, upper=bound.upper * scale)


def latency_of(histograms: Mapping[str, Histogram], window_s: float | None) -> ServerLatency:
    """``ServerLatency`` from histograms already reduced to a window (or cumulative: ``None``)."""
    return ServerLatency(
        window_s=window_s, **{name: quantiles_ms(histograms.get(name)) for name in LATENCY_FIELDS}
    )


class HistogramWindow:
    """Sliding-window increase of one histogram over successive scrapes.

    ``window_s=None`` accumulates everything from the first scrape on (a run's summary).
    Memory is bounded by the window: one increase per scrape inside it.
    """

    def __init__(self, window_s: float | None = DEFAULT_WINDOW_S) -> None:
        if window_s is not None and not window_s > 0:
            raise ValueError(f"window must be a positive number of seconds, got {window_s!r}")
        self.window_s = window_s
        self._last: Histogram | None = None
        self._steps: deque[tuple[float, Histogram]] = deque()
        self._total: Histogram | None = None  # unbounded window only
        self.scrapes = 0

    def observe(self, t: float, hist: Histogram) -> None:
        """Add the scrape taken at ``t`` (monotonic seconds)."""
        step = increase(hist, self._last)
        self._last = hist
        self.scrapes += 1
        if step is None:
            return
        if self.window_s is None:
            self._total = _add(self._total, step)
            return
        self._steps.append((t, step))
        self._evict(t)

    def _evict(self, now: float) -> None:
        assert self.window_s is not None
        while self._steps and self._steps[0][0] <= now - self.window_s:
            self._steps.popleft()

    def total(self, now: float) -> Histogram | None:
        """The observations inside the window ending at ``now``; ``None`` before two scrapes."""
        if self._last is None or self.scrapes < 2:
            return None
        if self.window_s is None:
            return self._total
        self._evict(now)
        if not self._steps:  # nothing observed inside the window: an empty histogram
            return Histogram(self._last.bounds, (0.0,) * len(self._last.bounds))
        total: Histogram | None = None
        for _, step in self._steps:
            total = _add(total, step)
        return total


class LatencyTracker:
    """The six latency histograms of one server, each in a ``HistogramWindow``.

    The metrics source keeps one with a 60 s window for the live panel; a run keeps one with
    ``window_s=None`` from its load's start to its end for the run record.
    """

    def __init__(self, window_s: float | None = DEFAULT_WINDOW_S) -> None:
        self.window_s = window_s
        self._windows: dict[str, HistogramWindow] = {}
        self._first_t: float | None = None
        self._last_t: float | None = None

    def observe(self, t: float, histograms: Mapping[str, Histogram]) -> None:
        """Add one scrape's histograms (by ``LATENCY_FIELDS`` name)."""
        if self._first_t is None:
            self._first_t = t
        self._last_t = t
        for name, hist in histograms.items():
            window = self._windows.get(name)
            if window is None:
                window = self._windows[name] = HistogramWindow(self.window_s)
            window.observe(t, hist)

    def latency(self, now: float | None = None) -> ServerLatency:
        """Quantiles over the window ending at ``now`` (default: the last scrape).

        An unbounded tracker reports the span it covered as ``window_s``.
        """
        at = self._last_t if now is None else now
        if at is None:
            return ServerLatency(window_s=self.window_s)
        totals = {name: w.total(at) for name, w in self._windows.items()}
        present = {name: hist for name, hist in totals.items() if hist is not None}
        span = self.window_s
        if span is None and self._first_t is not None:
            span = at - self._first_t
        return latency_of(present, span)

    def reset(self) -> None:
        """Forget every scrape (a different server)."""
        self._windows.clear()
        self._first_t = self._last_t = None
