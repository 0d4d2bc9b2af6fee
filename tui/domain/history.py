"""Bounded history of the panels' numbers, and a run's series downsampled for its record.

``TelemetryHistory`` keeps one ring buffer per number a chart draws (KV %, running,
waiting, prompt and generation tok/s, GPU memory and utilization, TTFT p50, host CPU and
the server's RSS) plus the last raw /metrics samples the advisor reads. Memory is bounded
by the capacities whatever the session's length.

``SeriesRecorder`` turns a run of any length into at most ``max_points`` ``SeriesPoint``s:
samples are averaged into time buckets, and when the buckets run out their width doubles
and neighbours merge, so a 5-minute run and a 10-hour run both fit.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from tui.domain.telemetry import (
    GpuSample,
    HostSample,
    SeriesPoint,
    ServerMetrics,
    SourceStatus,
)

T = TypeVar("T")

# Every number a run's series keeps, as SeriesPoint names it.
SERIES_FIELDS = tuple(name for name in SeriesPoint.model_fields if name != "t")
HOST_FIELDS = ("host_cpu_percent", "server_rss_bytes")
DEFAULT_CAPACITY = 3600  # an hour at 1 Hz
DEFAULT_RECENT = 120  # raw /metrics samples kept for the advisor (2 min at 1 Hz)
DEFAULT_MAX_POINTS = 240


class Ring(Generic[T]):
    """The last ``capacity`` ``(t, value)`` pairs, oldest first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._items: deque[tuple[float, T]] = deque(maxlen=capacity)

    def append(self, t: float, value: T) -> None:
        """Add a value read at ``t``; the oldest falls out when full."""
        self._items.append((t, value))

    def since(self, t0: float) -> list[tuple[float, T]]:
        """The pairs read at ``t0`` or later, oldest first."""
        out: list[tuple[float, T]] = []
        for item in reversed(self._items):
            if item[0] < t0:
                break
            out.append(item)
        out.reverse()
        return out

    @property
    def latest(self) -> tuple[float, T] | None:
        """The newest pair, if any."""
        return self._items[-1] if self._items else None

    @property
    def capacity(self) -> int:
        """How many pairs it holds at most."""
        assert self._items.maxlen is not None
        return self._items.maxlen

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[float, T]]:
        return iter(self._items)

    def clear(self) -> None:
        """Forget everything."""
        self._items.clear()


def metrics_values(sample: ServerMetrics) -> dict[str, float | None]:
    """The series numbers one /metrics sample gives (none for a sample that is not OK)."""
    if sample.status is not SourceStatus.OK:
        return {}
    ttft = sample.latency.ttft if sample.latency is not None else None
    return {
        "kv_cache_usage": sample.kv_cache_usage,
        "num_running": sample.num_running,
        "num_waiting": sample.num_waiting,
        "prompt_tokens_per_s": sample.prompt_tokens_per_s,
        "generation_tokens_per_s": sample.generation_tokens_per_s,
        "ttft_p50_ms": ttft.p50 if ttft is not None else None,
    }


def gpu_values(
    sample: GpuSample, server_indices: Collection[int] | None = None
) -> dict[str, float | None]:
    """GPU memory used (summed) and utilization (mean) over the server's GPUs.

    ``server_indices``: the GPUs the server uses (``tui.domain.gpus.server_gpu_indices``);
    ``None`` or empty: every GPU the source sees.
    """
    if sample.status is not SourceStatus.OK or not sample.devices:
        return {}
    devices = [d for d in sample.devices if not server_indices or d.index in server_indices]
    if not devices:
        return {}
    used = [d.memory_used for d in devices]
    utils = [d.utilization for d in devices]
    return {
        "gpu_mem_used_bytes": None if None in used else float(sum(u or 0 for u in used)),
        "gpu_util": None if None in utils else sum(u or 0.0 for u in utils) / len(utils),
    }


def host_values(sample: HostSample) -> dict[str, float | None]:
    """The host numbers a chart draws."""
    rss = sample.server_rss
    return {
        "host_cpu_percent": sample.cpu_percent,
        "server_rss_bytes": None if rss is None else float(rss),
    }


class TelemetryHistory:
    """Ring buffers of every chart's numbers, and the recent raw /metrics samples.

    Feed it every sample (``record_*``); read a chart's points with ``points(name, since)``.
    Samples that are not OK add nothing: a gap in a chart is a gap, not a zero.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, recent: int = DEFAULT_RECENT) -> None:
        self._rings: dict[str, Ring[float]] = {
            name: Ring(capacity) for name in (*SERIES_FIELDS, *HOST_FIELDS)
        }
        self._recent: Ring[ServerMetrics] = Ring(recent)

    @property
    def names(self) -> tuple[str, ...]:
        """Every number kept."""
        return tuple(self._rings)

    def _record(self, t: float, values: Mapping[str, float | None]) -> None:
        for name, value in values.items():
            if value is not None and math.isfinite(value):
                self._rings[name].append(t, float(value))

    def record_metrics(self, sample: ServerMetrics) -> None:
        """Keep a /metrics sample's numbers (and the sample, for the advisor)."""
        if sample.status is SourceStatus.OK:
            self._recent.append(sample.t, sample)
        self._record(sample.t, metrics_values(sample))

    def record_gpu(self, sample: GpuSample, server_indices: Collection[int] | None = None) -> None:
        """Keep a GPU sample's numbers (over the server's GPUs when given)."""
        self._record(sample.t, gpu_values(sample, server_indices))

    def record_host(self, sample: HostSample) -> None:
        """Keep a host sample's numbers."""
        self._record(sample.t, host_values(sample))

    def points(self, name: str, since: float = -math.inf) -> list[tuple[float, float]]:
        """``(t, value)`` of one number from ``since`` on, oldest first."""
        return self._rings[name].since(since)

    def ring(self, name: str) -> Ring[float]:
        """The ring buffer of one number."""
        return self._rings[name]

    def recent_metrics(self, since: float = -math.inf) -> list[ServerMetrics]:
        """The OK /metrics samples read from ``since`` on, oldest first (for the advisor)."""
        return [sample for _, sample in self._recent.since(since)]

    def clear(self) -> None:
        """Forget everything (a different server)."""
        for ring in self._rings.values():
            ring.clear()
        self._recent.clear()


@dataclass
class _Bucket:
    n: int = 0
    t_sum: float = 0.0
    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, t: float, values: Mapping[str, float | None]) -> None:
        self.n += 1
        self.t_sum += t
        for name, value in values.items():
            if value is not None and math.isfinite(value):
                self.sums[name] = self.sums.get(name, 0.0) + value
                self.counts[name] = self.counts.get(name, 0) + 1

    def merge(self, other: _Bucket) -> None:
        self.n += other.n
        self.t_sum += other.t_sum
        for name, value in other.sums.items():
            self.sums[name] = self.sums.get(name, 0.0) + value
            self.counts[name] = self.counts.get(name, 0) + other.counts[name]

    def point(self, start_t: float) -> SeriesPoint:
        means = {name: self.sums[name] / self.counts[name] for name in self.sums}
        return SeriesPoint(t=self.t_sum / self.n - start_t, **means)


class SeriesRecorder:
    """A run's telemetry as at most ``max_points`` time-bucketed means (``SeriesPoint``).

    ``start_t``: when the run was launched (monotonic seconds, the samples' clock); point
    times are seconds after it. Buckets start ``bucket_s`` wide and double when needed.
    """

    def __init__(
        self, start_t: float, max_points: int = DEFAULT_MAX_POINTS, bucket_s: float = 1.0
    ) -> None:
        if max_points < 2:
            raise ValueError(f"max_points must be at least 2, got {max_points}")
        if not bucket_s > 0:
            raise ValueError(f"bucket_s must be positive, got {bucket_s}")
        self.start_t = start_t
        self.max_points = max_points
        self.bucket_s = bucket_s
        self._buckets: dict[int, _Bucket] = {}

    def add(self, t: float, values: Mapping[str, float | None]) -> None:
        """Add numbers read at ``t`` (by ``SeriesPoint`` field name; unknown names refused)."""
        unknown = set(values) - set(SERIES_FIELDS)
        if unknown:
            raise ValueError(f"not series fields: {sorted(unknown)}")
        offset = max(0.0, t - self.start_t)
        while int(offset // self.bucket_s) >= self.max_points:
            self._coarsen()
        index = int(offset // self.bucket_s)
        self._buckets.setdefault(index, _Bucket()).add(t, values)

    def add_metrics(self, sample: ServerMetrics) -> None:
        """Add a /metrics sample's numbers."""
        values = metrics_values(sample)
        if values:
            self.add(sample.t, values)

    def add_gpu(self, sample: GpuSample, server_indices: Collection[int] | None = None) -> None:
        """Add a GPU sample's numbers (over the server's GPUs when given)."""
        values = gpu_values(sample, server_indices)
        if values:
            self.add(sample.t, values)

    def _coarsen(self) -> None:
        merged: dict[int, _Bucket] = {}
        for index in sorted(self._buckets):
            target = merged.setdefault(index // 2, _Bucket())
            target.merge(self._buckets[index])
        self._buckets = merged
        self.bucket_s *= 2

    def points(self) -> list[SeriesPoint]:
        """The run's series, oldest first; never more than ``max_points``."""
        return [self._buckets[i].point(self.start_t) for i in sorted(self._buckets)]
