"""Live numbers of a running load, once a second, kept off the streaming hot path.

Nothing here runs per token. Each snapshot walks the records of the requests in flight
(and of those finished since the last snapshot) and takes what is new in them: the TTFT
of a request whose first token came, the ITLs appended since. That costs one pass over at
most ``max_concurrency`` records per second, however many tokens flow. Rolling
percentiles come from per-snapshot buckets thinned to ``sample_cap`` values each.

Whether the *client* is the bottleneck is decided from its own event loop: a timer that
should fire every ``tick`` wakes late by as much as the loop was busy, and a chunk that
reached the socket meanwhile is timestamped late by about as much. See
:func:`client_is_bottleneck`.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from tui.domain.workload import LoadProgress
from tui.load.stats import RequestRecord

#: The client counts as the bottleneck when its event loop is late by this much on
#: average (ms) ...
LAG_FLOOR_MS = 2.0
#: ... and by at least this fraction of the median ITL it measures, or when it keeps its
#: core this busy (fraction of one CPU).
LAG_FRACTION_OF_ITL = 0.2
CPU_SATURATED = 0.9


def client_is_bottleneck(
    mean_lag_ms: float | None, itl_p50_ms: float | None, cpu_fraction: float | None
) -> bool:
    """True when the load client, not the server, limits what is measured.

    Either the client's core is saturated (``cpu_fraction >= 0.9`` of one CPU, where an
    asyncio client cannot go faster), or its event loop wakes late on average by at least
    ``LAG_FLOOR_MS`` and by at least a fifth of the median ITL: chunks then wait in the
    socket for about that long before they are timestamped, which distorts TTFT and ITL
    by that much. A single slow tick (a GC pause) moves the mean little and does not
    trigger it.
    """
    if cpu_fraction is not None and cpu_fraction >= CPU_SATURATED:
        return True
    if mean_lag_ms is None or mean_lag_ms < LAG_FLOOR_MS:
        return False
    if itl_p50_ms is None or itl_p50_ms <= 0:
        return True  # late by more than the floor with nothing to compare against
    return mean_lag_ms >= LAG_FRACTION_OF_ITL * itl_p50_ms


def _thin(values: list[float], cap: int) -> np.ndarray:
    if len(values) > cap:
        values = values[:: math.ceil(len(values) / cap)]
    return np.array(values, dtype=np.float64)


def _p50_p99(arrays: list[np.ndarray]) -> tuple[float | None, float | None]:
    values = np.concatenate(arrays) if arrays else np.empty(0)
    if not values.size:
        return None, None
    p50, p99 = np.percentile(values, [50.0, 99.0])
    return float(p50) * 1000.0, float(p99) * 1000.0


class LiveStats:
    """Counters and rolling windows behind the once-a-second progress.

    The runner calls :meth:`started` and :meth:`ended` once per request; the client fills
    the records; :meth:`snapshot` harvests them.
    """

    def __init__(self, total: int, window_s: float = 10.0, sample_cap: int = 2048) -> None:
        self.total = total
        self.window_s = window_s
        self.sample_cap = sample_cap
        self.done = 0
        self.failed = 0
        self._active: dict[int, RequestRecord] = {}
        self._finished: list[tuple[int, RequestRecord]] = []
        self._seen: dict[int, int] = {}  # chunks already harvested, per request
        # Per snapshot: (time, thinned TTFTs, thinned ITLs), numpy arrays so that the
        # rolling percentiles are a C-level concatenation, not a Python loop.
        self._buckets: deque[tuple[float, np.ndarray, np.ndarray]] = deque()
        self._last_time: float | None = None
        self._last_cpu: float | None = None

    @property
    def in_flight(self) -> int:
        """Requests sent and not finished."""
        return len(self._active)

    def started(self, key: int, record: RequestRecord) -> None:
        """A request was sent (``key`` unique within the run)."""
        self._active[key] = record

    def ended(self, key: int, record: RequestRecord) -> None:
        """A sent request finished, successfully or not."""
        self._active.pop(key, None)
        self._finished.append((key, record))
        self.done += 1
        if not record.success:
            self.failed += 1

    def _take(self, key: int, record: RequestRecord, ttfts: list[float], itls: list[float]) -> int:
        if record.ttft <= 0.0:
            return 0  # no token yet
        seen = self._seen.get(key, 0)
        chunks = 1 + len(record.itl)
        if seen == 0:
            ttfts.append(record.ttft)
        # chunk c (c >= 1) is ITL c - 1: the ITLs not harvested yet start at seen - 1.
        itls.extend(record.itl[max(0, seen - 1) :])
        self._seen[key] = chunks
        return chunks - seen

    def snapshot(
        self,
        now: float,
        elapsed: float,
        *,
        max_lag_s: float | None = None,
        mean_lag_s: float | None = None,
        cpu_s: float | None = None,
    ) -> LoadProgress:
        """Harvest what is new and return the progress at ``now`` (``perf_counter``).

        ``cpu_s`` is the client's ``time.process_time()``: the CPU share is taken between
        two snapshots.
        """
        ttfts: list[float] = []
        itls: list[float] = []
        chunks = 0
        for key, record in self._active.items():
            chunks += self._take(key, record, ttfts, itls)
        for key, record in self._finished:
            chunks += self._take(key, record, ttfts, itls)
            self._seen.pop(key, None)
        self._finished.clear()

        interval = now - self._last_time if self._last_time is not None else elapsed
        cpu_fraction: float | None = None
        if cpu_s is not None and self._last_cpu is not None and interval > 0:
            cpu_fraction = (cpu_s - self._last_cpu) / interval
        self._last_time, self._last_cpu = now, cpu_s

        self._buckets.append((now, _thin(ttfts, self.sample_cap), _thin(itls, self.sample_cap)))
        while self._buckets and self._buckets[0][0] < now - self.window_s:
            self._buckets.popleft()
        ttft_p50, ttft_p99 = _p50_p99([b for _, b, _ in self._buckets])
        itl_p50, itl_p99 = _p50_p99([b for _, _, b in self._buckets])
        mean_lag_ms = None if mean_lag_s is None else mean_lag_s * 1000.0
        return LoadProgress(
            elapsed=elapsed,
            done=self.done,
            failed=self.failed,
            in_flight=self.in_flight,
            total=self.total,
            # Chunks in the interval: one token per chunk at vLLM's default stream
            # interval, the same count bench serve's peak tok/s uses.
            output_tokens_per_s=chunks / interval if interval > 0 else 0.0,
            ttft_p50_ms=ttft_p50,
            ttft_p99_ms=ttft_p99,
            itl_p50_ms=itl_p50,
            itl_p99_ms=itl_p99,
            loop_lag_ms=None if max_lag_s is None else max_lag_s * 1000.0,
            loop_lag_mean_ms=mean_lag_ms,
            client_cpu_pct=None if cpu_fraction is None else 100.0 * cpu_fraction,
            client_bound=client_is_bottleneck(mean_lag_ms, itl_p50, cpu_fraction),
        )
