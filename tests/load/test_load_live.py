"""Live progress: harvesting records once a second, and the client-bottleneck rule."""

from __future__ import annotations

import pytest

from tui.domain.workload import LoadProgress
from tui.load.live import (
    CPU_SATURATED,
    LAG_FLOOR_MS,
    LiveStats,
    client_is_bottleneck,
)
from tui.load.stats import RequestRecord


@pytest.mark.parametrize(
    ("mean_lag_ms", "itl_p50_ms", "cpu", "expected"),
    [
        (None, None, None, False),  # nothing measured yet
        (0.5, 20.0, 0.3, False),  # a healthy loop
        (LAG_FLOOR_MS - 0.1, 1.0, 0.3, False),  # below the floor, whatever the ITL
        (3.0, 20.0, 0.3, False),  # 3 ms late against 20 ms ITLs: 15 %, tolerated
        (4.0, 20.0, 0.3, True),  # 20 % of the median ITL
        (25.0, None, 0.5, True),  # late with no ITL to compare: flagged
        (0.1, 20.0, CPU_SATURATED, True),  # a saturated core, lag or not
        (0.1, 20.0, None, False),
    ],
)
def test_client_bottleneck_rule(
    mean_lag_ms: float | None, itl_p50_ms: float | None, cpu: float | None, expected: bool
) -> None:
    assert client_is_bottleneck(mean_lag_ms, itl_p50_ms, cpu) is expected


def test_progress_carries_the_clients_health_typed() -> None:
    progress = LoadProgress(
        elapsed=1, done=0, failed=0, in_flight=0, total=1, output_tokens_per_s=0
    )
    assert isinstance(progress, LoadProgress)
    assert progress.client_bound is False and progress.client_cpu_pct is None


def test_snapshot_harvests_new_chunks_only() -> None:
    live = LiveStats(total=3, window_s=10.0)
    a, b = RequestRecord(), RequestRecord()
    live.started(0, a)
    live.started(1, b)
    first = live.snapshot(10.0, 0.0, cpu_s=5.0)  # baseline: nothing yet
    assert (first.in_flight, first.done, first.ttft_p50_ms) == (2, 0, None)

    a.ttft, a.itl = 0.100, [0.010, 0.020]  # 3 chunks
    b.ttft = 0.300  # 1 chunk
    second = live.snapshot(12.0, 2.0, max_lag_s=0.004, mean_lag_s=0.001, cpu_s=6.0)
    assert second.output_tokens_per_s == pytest.approx(4 / 2.0)  # 4 chunks in 2 s
    assert second.ttft_p50_ms == pytest.approx(200.0)  # 100 and 300 ms
    assert second.itl_p50_ms == pytest.approx(15.0)  # 10 and 20 ms
    assert second.loop_lag_ms == pytest.approx(4.0)
    assert second.loop_lag_mean_ms == pytest.approx(1.0)
    assert second.client_cpu_pct == pytest.approx(50.0)  # 1 CPU-s over 2 s
    assert second.client_bound is False

    a.itl.append(0.030)  # one more chunk for a; a then finishes successfully
    a.success = True
    live.ended(0, a)
    b.error = "boom"
    live.ended(1, b)
    third = live.snapshot(13.0, 3.0, cpu_s=6.1)
    assert third.output_tokens_per_s == pytest.approx(1.0)  # only the new ITL counts
    assert (third.done, third.failed, third.in_flight) == (2, 1, 0)
    # The rolling window still holds the earlier samples: ITLs 10, 20, 30 ms.
    assert third.itl_p50_ms == pytest.approx(20.0)
    fourth = live.snapshot(25.0, 15.0)  # 12 s later: the window (10 s) is empty
    assert fourth.itl_p50_ms is None and fourth.output_tokens_per_s == 0.0


def test_a_request_that_starts_and_ends_between_snapshots_is_counted() -> None:
    live = LiveStats(total=1)
    live.snapshot(0.0, 0.0)
    rec = RequestRecord(success=True, ttft=0.05, itl=[0.01] * 9)
    live.started(7, rec)
    live.ended(7, rec)
    progress = live.snapshot(1.0, 1.0)
    assert progress.output_tokens_per_s == pytest.approx(10.0)
    assert progress.ttft_p50_ms == pytest.approx(50.0)


def test_samples_are_thinned_to_the_cap() -> None:
    live = LiveStats(total=1, sample_cap=100)
    live.snapshot(0.0, 0.0)
    rec = RequestRecord(ttft=0.01, itl=[0.001 * (i % 7 + 1) for i in range(10_000)])
    live.started(0, rec)
    progress = live.snapshot(1.0, 1.0)
    assert progress.output_tokens_per_s == pytest.approx(10_001)  # counts are exact
    assert progress.itl_p50_ms is not None and 1.0 <= progress.itl_p50_ms <= 7.0
