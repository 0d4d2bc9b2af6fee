"""Age and state of every source's data, the ring buffers, and a run's downsampled series."""

from __future__ import annotations

import pytest

from tui.domain.freshness import NO_READING_YET, freshness
from tui.domain.history import SERIES_FIELDS, Ring, SeriesRecorder, TelemetryHistory
from tui.domain.telemetry import (
    GpuDevice,
    GpuSample,
    HostSample,
    LatencyQuantiles,
    ServerLatency,
    ServerMetrics,
    SourceStatus,
)

GIB = 2**30


def metrics(t: float, **values: float) -> ServerMetrics:
    return ServerMetrics(t=t, status=SourceStatus.OK, **values)  # type: ignore[arg-type]


def test_fresh_then_stale_after_two_missed_intervals() -> None:
    sample = metrics(100.0)
    assert freshness(sample, 100.4, 1.0).state is SourceStatus.OK
    assert freshness(sample, 102.0, 1.0).state is SourceStatus.OK  # two intervals: not yet
    stale = freshness(sample, 102.5, 1.0)
    assert stale.state is SourceStatus.STALE and stale.age_s == pytest.approx(2.5)
    assert stale.reason == "no new reading for 2.5 s"
    assert freshness(sample, 102.5, 5.0).ok  # a slower poll tolerates more


def test_down_keeps_its_reason_and_nothing_read_is_not_ok() -> None:
    down = ServerMetrics(t=50.0, status=SourceStatus.DOWN, message="cannot connect to x")
    f = freshness(down, 51.0, 1.0)
    assert f.state is SourceStatus.DOWN and f.reason == "cannot connect to x"
    assert f.label == "down: cannot connect to x"
    none = freshness(None, 10.0, 1.0)
    assert none.state is SourceStatus.STALE and none.reason == NO_READING_YET
    unavailable = GpuSample(t=0.0, source="nvml", status=SourceStatus.UNAVAILABLE, message="no")
    assert freshness(unavailable, 999.0, 1.0).state is SourceStatus.UNAVAILABLE
    assert freshness(HostSample(t=3.0), 3.5, 1.0).label == "0.5 s ago"


def test_ring_is_bounded_and_reads_since() -> None:
    ring: Ring[int] = Ring(3)
    for t in range(5):
        ring.append(float(t), t * 10)
    assert list(ring) == [(2.0, 20), (3.0, 30), (4.0, 40)]
    assert ring.since(3.0) == [(3.0, 30), (4.0, 40)]
    assert ring.latest == (4.0, 40) and len(ring) == 3
    with pytest.raises(ValueError):
        Ring(0)


def test_history_keeps_every_chart_and_skips_bad_samples() -> None:
    history = TelemetryHistory(capacity=100, recent=2)
    latency = ServerLatency(ttft=LatencyQuantiles(p50=12.0, count=3))
    for t in range(5):
        history.record_metrics(
            ServerMetrics(
                t=float(t),
                status=SourceStatus.OK,
                kv_cache_usage=0.1 * t,
                num_running=t,
                num_waiting=0,
                generation_tokens_per_s=100.0 if t else None,
                latency=latency,
            )
        )
    history.record_metrics(ServerMetrics(t=5.0, status=SourceStatus.DOWN, message="gone"))
    assert [v for _, v in history.points("kv_cache_usage")] == pytest.approx(
        [0.0, 0.1, 0.2, 0.3, 0.4]
    )
    assert len(history.points("generation_tokens_per_s")) == 4  # None is a gap, not a 0
    assert history.points("ttft_p50_ms", since=3.0) == [(3.0, 12.0), (4.0, 12.0)]
    assert [m.t for m in history.recent_metrics()] == [3.0, 4.0]  # bounded, OK only
    gpu = GpuSample(
        t=6.0,
        source="nvml",
        status=SourceStatus.OK,
        devices=(
            GpuDevice(0, "A", memory_used=4 * GIB, memory_total=8 * GIB, utilization=50.0),
            GpuDevice(1, "B", memory_used=2 * GIB, memory_total=8 * GIB, utilization=100.0),
            GpuDevice(2, "C", memory_used=1 * GIB, memory_total=8 * GIB, utilization=0.0),
        ),
    )
    history.record_gpu(gpu, server_indices={0, 1})
    assert history.points("gpu_mem_used_bytes") == [(6.0, 6.0 * GIB)]
    assert history.points("gpu_util") == [(6.0, 75.0)]
    history.record_host(HostSample(t=7.0, cpu_percent=12.5, server_rss=1000))
    assert history.points("server_rss_bytes") == [(7.0, 1000.0)]


def test_series_means_per_bucket() -> None:
    rec = SeriesRecorder(start_t=100.0, max_points=10, bucket_s=2.0)
    rec.add(100.0, {"kv_cache_usage": 0.2})
    rec.add(101.0, {"kv_cache_usage": 0.4, "num_running": 3.0})
    rec.add(102.5, {"kv_cache_usage": 0.9})
    points = rec.points()
    assert [p.t for p in points] == pytest.approx([0.5, 2.5])
    assert points[0].kv_cache_usage == pytest.approx(0.3)
    assert points[0].num_running == 3.0 and points[1].num_running is None
    with pytest.raises(ValueError):
        rec.add(103.0, {"nonsense": 1.0})


def test_series_stays_bounded_for_any_length_and_keeps_the_mean() -> None:
    rec = SeriesRecorder(start_t=0.0, max_points=50)
    for t in range(36_000):  # ten hours at 1 Hz
        rec.add(float(t), {"num_running": float(t % 10)})
    points = rec.points()
    assert len(points) <= 50
    assert points[-1].t > 30_000  # the end of the run is there
    mean = sum(p.num_running or 0.0 for p in points) / len(points)
    assert mean == pytest.approx(4.5, abs=0.01)  # merging buckets keeps the run's mean
    assert set(SERIES_FIELDS) >= {"kv_cache_usage", "gpu_util", "ttft_p50_ms"}
