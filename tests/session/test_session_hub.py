"""The telemetry hub from fake sources: one instance each, peaks, the GPU it may show."""

from __future__ import annotations

import asyncio

from fakes.sources import FakeGpu, FakeHost, FakeMetrics, gpu_sample

from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics, SourceStatus
from tui.session.hub import TelemetryHub

ABSENT = GpuSample(t=0.0, source="remote", status=SourceStatus.UNAVAILABLE, message="not visible")


async def until(done: object, timeout: float = 10.0) -> None:
    async def wait() -> None:
        while not done():  # type: ignore[operator]
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), timeout)


async def test_each_source_is_polled_and_closed_once_and_peaks_cover_only_the_load() -> None:
    seen: list[object] = []
    gpu = FakeGpu(gpu_sample(used_gib=9.0, util=40.0), gpu_sample(used_gib=9.5, util=97.0))
    host, metrics = FakeHost(), FakeMetrics()
    hub = TelemetryHub(emit=seen.append, interval_s=0.01, gpu=gpu, host=host, metrics=metrics)
    hub.start()
    hub.server_pid = 77
    await until(lambda: gpu.reads >= 2 and 77 in host.asked)
    hub.begin_peaks()
    metrics.kv, metrics.waiting = 0.93, 12.0
    hub.watch_server("http://127.0.0.1:8123")
    await until(lambda: any(isinstance(s, ServerMetrics) for s in seen) and gpu.reads >= 4)
    peaks = hub.end_peaks()
    metrics.kv = 1.0  # after the load: not a peak of it
    await asyncio.sleep(0.05)
    await hub.aclose()
    assert metrics.targets == ["http://127.0.0.1:8123"]
    assert peaks.kv_cache_usage == 0.93 and peaks.num_waiting == 12.0
    assert peaks.gpu_util == 97.0 and peaks.server_rss_bytes == 1024**3
    assert gpu.closed and host.closed and metrics.closed
    assert any(isinstance(s, HostSample) for s in seen)


async def test_with_no_gpu_source_the_panel_says_why_and_no_gpu_peak_is_recorded() -> None:
    seen: list[object] = []
    metrics = FakeMetrics()
    hub = TelemetryHub(emit=seen.append, interval_s=0.01, metrics=metrics, gpu_absent=ABSENT)
    hub.start()
    hub.begin_peaks()
    hub.watch_server("http://gpu-box:8000")
    await until(lambda: metrics.sampled.is_set())
    peaks = hub.end_peaks()
    await hub.aclose()
    gpus = [s for s in seen if isinstance(s, GpuSample)]
    assert gpus == [ABSENT]
    assert peaks.gpu_util is None and peaks.gpu_mem_used_bytes is None


async def test_a_servers_own_gpu_gauges_are_the_gpu_when_no_source_was_given() -> None:
    seen: list[object] = []
    own = gpu_sample(used_gib=6.0)
    metrics = FakeMetrics(gpu=own)
    hub = TelemetryHub(emit=seen.append, interval_s=0.01, metrics=metrics, gpu_absent=ABSENT)
    hub.start()
    hub.watch_server("http://127.0.0.1:8000")
    await until(lambda: own in seen)
    await hub.unwatch_server()  # the server stopped: its gauges went with it
    await hub.aclose()
    gpus = [s for s in seen if isinstance(s, GpuSample)]
    assert gpus[0] == ABSENT and own in gpus and gpus[-1] == ABSENT
