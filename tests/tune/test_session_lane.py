"""A sweep lane over a session: the SLOs travel with each load, and the prefix-cache hit
rate comes from the session's telemetry hub (no second scrape, no state on a runner)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import httpx
from fakes.sources import FakeMetrics

from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import BenchResult, RunRecord, SweepTag
from tui.domain.telemetry import ServerMetrics, SourceStatus
from tui.domain.workload import LoadSpec
from tui.session.hub import TelemetryHub
from tui.session.port import SessionEvent
from tui.tune.session_lane import SessionLane

URL = "http://127.0.0.1:8123"


def counters(hits: float, queries: float) -> ServerMetrics:
    extra = {"prefix_cache_hits_total": hits, "prefix_cache_queries_total": queries}
    return ServerMetrics(t=0.0, status=SourceStatus.OK, extra=extra)


class Target:
    """The session as a lane sees it: a ready server, loads, the hub's next readings."""

    def __init__(self, readings: list[ServerMetrics | None]) -> None:
        self.readings = readings
        self.goodputs: list[dict[str, float]] = []

    state = ServerState.READY
    current: RunRecord | None = None
    base_url: str | None = URL

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> None:
        pass

    async def restart(self, flags: ServeFlags, sweep: SweepTag | None = None) -> RunRecord:
        raise AssertionError("not in this test")

    async def run_load(
        self,
        spec: LoadSpec,
        model: str | None = None,
        goodput: Mapping[str, float] | None = None,
    ) -> BenchResult | None:
        self.goodputs.append(dict(goodput or {}))
        return BenchResult(completed=spec.num_prompts)

    async def fresh_metrics(self) -> ServerMetrics | None:
        return self.readings.pop(0)

    async def cancel_load(self) -> None:
        pass

    async def stop_server(self) -> None:
        pass


async def test_each_load_carries_its_slos_and_the_hit_rate_comes_from_the_hub() -> None:
    target = Target([counters(10, 100), counters(40, 160), counters(40, 160), None])
    async with httpx.AsyncClient() as client:
        lane = SessionLane(target, client)
        first = await lane.bench(LoadSpec(num_prompts=4), model=None, goodput={"ttft": 150.0})
        second = await lane.bench(LoadSpec(num_prompts=4), model=None, goodput={})
    assert target.goodputs == [{"ttft": 150.0}, {}]
    assert first.prefix_hit_pct == 50.0  # 30 hits over 60 queries, between the readings
    assert second.prefix_hit_pct is None  # no reading after it: unknown, not 0 %
    assert first.result.completed == 4


async def test_the_hub_hands_its_next_reading_to_whoever_waits() -> None:
    metrics = FakeMetrics()
    metrics.extra = {"prefix_cache_hits_total": 3.0, "prefix_cache_queries_total": 9.0}
    hub = TelemetryHub(emit=lambda e: None, interval_s=0.01, metrics=metrics)
    assert await hub.next_metrics() is None  # not watching a server: nothing to wait for
    hub.start()
    hub.watch_server(URL)
    before = metrics.scrapes
    reading = await asyncio.wait_for(hub.next_metrics(), 30)
    assert reading is not None and reading.extra["prefix_cache_queries_total"] == 9.0
    assert metrics.scrapes > before  # a reading taken after the call, by the hub's poller
    await hub.aclose()
