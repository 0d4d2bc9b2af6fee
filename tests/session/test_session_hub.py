"""The telemetry hub from fake sources: one instance each, peaks, the GPU it may show, the
freshness of every source, the server's GPUs, advice, and what a run keeps."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable

from fakes.sources import (
    FailingGpu,
    FakeGpu,
    FakeHost,
    FakeMetrics,
    HangingGpu,
    gpu_box,
    gpu_sample,
)

from tui.domain.events import Exited, Launched, Ready
from tui.domain.flags.serve import ServeFlags
from tui.domain.gpus import RELEASED_SIMULATED_GPU
from tui.domain.quantiles import histogram_from_buckets
from tui.domain.record import RunEvent, TelemetryRecorded
from tui.domain.results import BenchResult, RunRecord
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics, SourceStatus
from tui.session.hub import NOT_WATCHING, GpuPolicy, TelemetryHub
from tui.session.port import TelemetryStatus

ABSENT = GpuSample(t=0.0, source="remote", status=SourceStatus.UNAVAILABLE, message="not visible")
URL = "http://127.0.0.1:8123"


async def until(done: Callable[[], bool], timeout: float = 20.0) -> None:
    """Wait (on the loop, bounded) until ``done()`` holds: the pollers run meanwhile."""

    async def wait() -> None:
        while not done():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), timeout)


class Clock:
    """A hand-driven clock for the hub's freshness stamps."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorded:
    """The run events the hub recorded, by run."""

    def __init__(self) -> None:
        self.events: list[tuple[RunEvent, int | None]] = []

    def __call__(self, event: RunEvent, run_id: int | None) -> None:
        self.events.append((event, run_id))

    def telemetry(self) -> list[tuple[TelemetryRecorded, int | None]]:
        return [(e, r) for e, r in self.events if isinstance(e, TelemetryRecorded)]


def run(run_id: int = 7, **flags: object) -> RunRecord:
    return RunRecord(id=run_id, label=f"#{run_id}", flags=ServeFlags(model="m", **flags))


def hist(*counts: float) -> object:
    """A seconds histogram with buckets 0.1, 0.5, 1, +Inf and these cumulative counts."""
    bounds = (0.1, 0.5, 1.0, math.inf)
    return histogram_from_buckets(zip(bounds, counts, strict=True), total=sum(counts) / 10)


async def test_each_source_is_polled_and_closed_once_and_peaks_cover_only_the_load() -> None:
    seen: list[object] = []
    gpu = FakeGpu(gpu_sample(used_gib=9.0, util=40.0), gpu_sample(used_gib=9.5, util=97.0))
    host, metrics = FakeHost(), FakeMetrics()
    hub = TelemetryHub(emit=seen.append, interval_s=0.01, gpu=gpu, host=host, metrics=metrics)
    hub.start()
    hub.server_pid = 77
    await until(lambda: gpu.reads >= 2 and 77 in host.asked)
    hub.begin_load()
    metrics.kv, metrics.waiting = 0.93, 12.0
    hub.watch_server(URL)
    await until(lambda: any(isinstance(s, ServerMetrics) for s in seen) and gpu.reads >= 4)
    peaks = hub.end_load(None)
    metrics.kv = 1.0  # after the load: not a peak of it
    await until(lambda: metrics.scrapes >= 3)
    await hub.aclose()
    assert metrics.targets == [URL]
    assert peaks.kv_cache_usage == 0.93 and peaks.num_waiting == 12.0
    assert peaks.gpu_util == 97.0 and peaks.server_rss_bytes == 1024**3
    assert gpu.closed and host.closed and metrics.closed
    assert any(isinstance(s, HostSample) for s in seen)
    assert any(isinstance(s, TelemetryStatus) for s in seen)  # the tick reports freshness
    assert [v for _, v in hub.history.points("kv_cache_usage")][:1] == [0.93]


async def test_with_no_gpu_source_the_panel_says_why_and_no_gpu_peak_is_recorded() -> None:
    seen: list[object] = []
    metrics = FakeMetrics()
    hub = TelemetryHub(
        emit=seen.append, interval_s=0.01, metrics=metrics, policy=GpuPolicy(absent=ABSENT)
    )
    hub.start()
    hub.begin_load()
    hub.watch_server("http://gpu-box:8000")
    await until(lambda: metrics.sampled.is_set())
    peaks = hub.end_load(None)
    await hub.aclose()
    gpus = [s for s in seen if isinstance(s, GpuSample)]
    assert gpus and all(g == ABSENT for g in gpus)
    assert peaks.gpu_util is None and peaks.gpu_mem_used_bytes is None


async def test_a_servers_own_gpu_gauges_are_the_gpu_when_no_source_was_given() -> None:
    seen: list[object] = []
    own = gpu_sample(used_gib=6.0)
    metrics = FakeMetrics(gpu=own)
    hub = TelemetryHub(
        emit=seen.append, interval_s=0.01, metrics=metrics, policy=GpuPolicy(absent=ABSENT)
    )
    hub.start()
    hub.watch_server(URL)
    await until(lambda: own in seen)
    await hub.unwatch_server()  # the server stopped: its gauges went with it
    await hub.aclose()
    gpus = [s for s in seen if isinstance(s, GpuSample)]
    assert gpus[0] == ABSENT and own in gpus and gpus[-1] == ABSENT
    last_metrics = [s for s in seen if isinstance(s, ServerMetrics)][-1]
    assert last_metrics.status is SourceStatus.UNAVAILABLE and last_metrics.message == NOT_WATCHING


async def test_the_simulated_gpu_reads_released_once_its_simulator_is_gone_and_stays_current() -> (
    None
):
    seen: list[object] = []
    clock = Clock()
    metrics = FakeMetrics(gpu=gpu_sample(used_gib=9.3, util=97.0))
    policy = GpuPolicy(absent=ABSENT, simulated=True)
    hub = TelemetryHub(
        emit=seen.append, interval_s=0.01, metrics=metrics, policy=policy, clock=clock
    )
    hub.start()
    hub.watch_server(URL)
    await until(lambda: metrics.scrapes >= 1 and hub.latest_gpu is not ABSENT)
    await hub.unwatch_server()
    released = hub.latest_gpu
    assert released is not None and released.message == RELEASED_SIMULATED_GPU
    (device,) = released.devices
    assert device.memory_used == 0 and device.utilization == 0.0  # not the last 9.3 GiB
    clock.now += 60  # a state, not a poll: it never turns stale
    status = hub.status()
    assert status.gpu.state is SourceStatus.OK and status.metrics is None
    await hub.aclose()


async def test_a_source_that_hangs_turns_stale_after_two_missed_intervals() -> None:
    clock = Clock()
    gpu = HangingGpu()
    hub = TelemetryHub(emit=lambda _: None, interval_s=1.0, gpu=gpu, clock=clock)
    hub.start()
    await asyncio.wait_for(gpu.hanging.wait(), 20)  # one reading in, the next one stuck
    clock.now += 1.5
    assert hub.status().gpu.state is SourceStatus.OK
    assert hub.status().gpu.age_s == 1.5
    clock.now += 1.0  # 2.5 s: two intervals missed
    stale = hub.status().gpu
    assert stale.state is SourceStatus.STALE and "no new reading" in stale.reason
    gpu.release.set()
    await hub.aclose()


async def test_a_source_that_raises_is_down_with_its_reason() -> None:
    gpu = FailingGpu(RuntimeError("NVML: the driver fell over"))
    hub = TelemetryHub(emit=lambda _: None, interval_s=0.01, gpu=gpu)
    hub.start()
    await until(lambda: gpu.reads >= 2)
    down = hub.status().gpu
    await hub.aclose()
    assert down.state is SourceStatus.DOWN and "the driver fell over" in down.reason


async def test_an_unreadable_page_is_down_with_its_reason_and_so_is_its_gpu() -> None:
    metrics = FakeMetrics(gpu=gpu_sample())
    metrics.status, metrics.message = SourceStatus.DOWN, "connection refused"
    hub = TelemetryHub(emit=lambda _: None, interval_s=0.01, metrics=metrics)
    hub.start()
    hub.watch_server(URL)
    await until(lambda: metrics.scrapes >= 1 and hub.latest_gpu is not None)
    status = hub.status()
    await hub.aclose()
    assert status.metrics is not None and status.metrics.state is SourceStatus.DOWN
    assert status.metrics.reason == "connection refused"
    assert status.gpu.state is SourceStatus.DOWN and status.gpu.reason == "connection refused"


async def test_attached_the_pages_own_gauges_win_over_local_nvml_while_it_has_them() -> None:
    seen: list[object] = []
    local = GpuSample(t=0.0, source="nvml", status=SourceStatus.UNAVAILABLE, message="no driver")
    page = gpu_sample(used_gib=7.0)
    gpu, metrics = FakeGpu(local), FakeMetrics(gpu=page)
    hub = TelemetryHub(
        emit=seen.append,
        interval_s=0.01,
        gpu=gpu,
        metrics=metrics,
        policy=GpuPolicy(page_first=True),
    )
    hub.start()
    await until(lambda: local in seen)
    hub.watch_server(URL)
    await until(lambda: page in seen)
    reads = gpu.reads
    await until(lambda: gpu.reads >= reads + 3)
    assert hub.latest_gpu is page  # the local source's readings are held back meanwhile
    metrics.gpu = None  # a server whose page has no gauges: this machine's reading again
    await until(lambda: hub.latest_gpu is local)
    await hub.aclose()


async def test_the_servers_gpus_are_marked_from_its_flags_and_its_processes() -> None:
    gpu = FakeGpu(gpu_box(10.0, 60.0, 60.0, 1.0))
    host = FakeHost(server_pids=(501, 502))
    hub = TelemetryHub(emit=lambda _: None, interval_s=0.01, gpu=gpu, host=host)
    hub.start()
    launched = Launched(pid=501, argv=("vllm", "serve", "m"), log_path=None)
    hub.follow(launched, run(tensor_parallel_size=2), url=None, pid=501)
    await until(lambda: gpu.reads >= 2 and 501 in host.asked)
    await until(lambda: hub.status().server_gpus == frozenset({0, 1}) and gpu.reads >= 4)
    # NVML lists the server's process on a GPU: that is exact, whatever the flags say.
    box = gpu_box(10.0, 60.0, 60.0, 1.0)
    devices = list(box.devices)
    devices[2] = dataclasses.replace(devices[2], processes=((502, 1),))
    gpu.answer(dataclasses.replace(box, devices=tuple(devices)))
    await until(lambda: hub.status().server_gpus == frozenset({2}))
    hub.follow(Exited(exit_code=0), None, url=None, pid=None)
    await until(lambda: hub.status().server_gpus == frozenset())  # no server, no marks
    await hub.aclose()


async def test_advice_holds_only_while_its_condition_does() -> None:
    metrics = FakeMetrics()
    hub = TelemetryHub(emit=lambda _: None, interval_s=0.01, metrics=metrics)
    hub.start()
    hub.follow(Launched(pid=1, argv=(), log_path=None), run(), url=None, pid=1)
    hub.follow(Ready(elapsed=1.0), run(), url=URL, pid=1)
    metrics.kv, metrics.waiting = 0.99, 6.0
    await until(lambda: metrics.scrapes >= 4 and bool(hub.status().advice))
    (advice,) = hub.status().advice
    assert advice.code == "kv_saturated"
    assert advice.fix is not None and advice.fix.set == {"kv_cache_dtype": "fp8"}
    metrics.kv, metrics.waiting = 0.4, 0.0
    await until(lambda: not hub.status().advice)
    await hub.aclose()


async def test_a_run_keeps_its_series_and_its_loads_server_side_latency() -> None:
    recorded = Recorded()
    metrics = FakeMetrics()
    metrics.histograms = {"ttft": hist(0, 0, 0, 0), "e2el": hist(0, 0, 0, 0)}
    hub = TelemetryHub(emit=lambda _: None, interval_s=0.01, metrics=metrics, record=recorded)
    hub.start()
    hub.follow(Launched(pid=1, argv=(), log_path=None), run(), url=None, pid=1)
    hub.follow(Ready(elapsed=1.0), run(), url=URL, pid=1)
    await until(lambda: metrics.scrapes >= 2)
    hub.begin_load()
    metrics.t = 1.0
    # Two of the load's four requests counted by the server when the client has all four.
    metrics.histograms = {"ttft": hist(1, 2, 2, 2), "e2el": hist(0, 0, 2, 2)}
    scrapes = metrics.scrapes
    await until(lambda: metrics.scrapes >= scrapes + 2)
    hub.end_load(BenchResult(completed=4, duration=1.0))
    scrapes = metrics.scrapes
    await until(lambda: metrics.scrapes >= scrapes + 2)
    assert not recorded.telemetry()  # it waits for the last two
    metrics.histograms = {"ttft": hist(2, 4, 4, 4), "e2el": hist(0, 1, 4, 4)}
    await until(lambda: bool(recorded.telemetry()))
    (event, run_id), *_ = recorded.telemetry()
    assert run_id == 7 and event.server_latency is not None and not event.load_cancelled
    ttft = event.server_latency.ttft
    assert ttft is not None and ttft.count == 4 and ttft.p50 is not None
    assert 50.0 <= ttft.p50 <= 100.0  # the rank-2 observation sits in the 0-0.1 s bucket
    assert event.series and event.series[-1].kv_cache_usage == 0.25
    hub.follow(Exited(exit_code=0), run(), url=None, pid=None)
    final, final_run = recorded.telemetry()[-1]
    assert final_run == 7 and final.server_latency is None and final.series
    await hub.aclose()


async def test_a_load_the_server_never_counts_settles_with_what_it_has() -> None:
    recorded = Recorded()
    clock = Clock()
    metrics = FakeMetrics()  # a page without latency histograms
    hub = TelemetryHub(
        emit=lambda _: None, interval_s=0.01, metrics=metrics, record=recorded, clock=clock
    )
    hub.start()
    hub.follow(Launched(pid=1, argv=(), log_path=None), run(), url=None, pid=1)
    hub.follow(Ready(elapsed=1.0), run(), url=URL, pid=1)
    await until(lambda: metrics.scrapes >= 1)
    hub.begin_load()
    hub.end_load(BenchResult(completed=4, duration=1.0))
    clock.now += 10  # past the settle time: the next tick gives up waiting
    await until(lambda: bool(recorded.telemetry()))
    (event, _), *_ = recorded.telemetry()
    assert event.server_latency is None and event.series is not None
    await hub.aclose()
