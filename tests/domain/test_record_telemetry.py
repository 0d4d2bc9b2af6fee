"""``TelemetryRecorded`` folded into a run: the series, and a load's server-side latency only
where that load's bench is kept."""

from __future__ import annotations

from tui.domain.flags.serve import ServeFlags
from tui.domain.record import LoadRecorded, TelemetryRecorded, apply
from tui.domain.results import BenchResult, RunRecord, TelemetryPeaks
from tui.domain.telemetry import LatencyQuantiles, SeriesPoint, ServerLatency
from tui.domain.workload import LoadSpec


def latency(p50: float) -> ServerLatency:
    return ServerLatency(window_s=12.0, ttft=LatencyQuantiles(p50=p50, count=8))


def loaded(record: RunRecord, *, cancelled: bool) -> RunRecord:
    result = BenchResult(completed=8, cancelled=cancelled)
    return apply(record, LoadRecorded(result, LoadSpec(), TelemetryPeaks()))


def test_the_series_and_the_latency_land_on_the_run_and_nothing_is_a_change() -> None:
    run = loaded(RunRecord(id=1, flags=ServeFlags(model="m")), cancelled=False)
    series = [SeriesPoint(t=1.0, kv_cache_usage=0.5)]
    after = apply(run, TelemetryRecorded(series=series, server_latency=latency(120)))
    assert after.series == series and after.server_latency == latency(120)
    assert apply(after, TelemetryRecorded(series=series)) is after  # same: no store write
    assert apply(after, TelemetryRecorded()) is after
    longer = [*series, SeriesPoint(t=2.0, kv_cache_usage=0.7)]
    ended = apply(after, TelemetryRecorded(series=longer))  # the run ended: whole series
    assert ended.series == longer and ended.server_latency == latency(120)


def test_a_new_load_clears_the_last_loads_latency_until_its_own_settles() -> None:
    run = loaded(RunRecord(id=1, flags=ServeFlags(model="m")), cancelled=False)
    run = apply(run, TelemetryRecorded(server_latency=latency(120)))
    again = loaded(run, cancelled=False)
    assert again.server_latency is None  # never the previous load's beside the new bench
    assert apply(again, TelemetryRecorded(server_latency=latency(90))).server_latency == latency(90)


def test_a_cancelled_loads_latency_never_sits_beside_a_completed_loads_bench() -> None:
    run = loaded(RunRecord(id=1, flags=ServeFlags(model="m")), cancelled=False)
    run = apply(run, TelemetryRecorded(server_latency=latency(120)))
    partial = loaded(run, cancelled=True)  # the completed bench stays
    kept = apply(partial, TelemetryRecorded(server_latency=latency(999), load_cancelled=True))
    assert kept.server_latency == latency(120)
    first = loaded(RunRecord(id=2, flags=ServeFlags(model="m")), cancelled=True)
    only = apply(first, TelemetryRecorded(server_latency=latency(50), load_cancelled=True))
    assert only.server_latency == latency(50)  # its partial bench is the one shown
