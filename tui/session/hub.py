"""The telemetry hub: one instance per source, their pollers, what the panels are told.

A mode hands the hub the sources it built (each exactly once; the pre-flight estimator
shares the same GPU source instance): the GPU (NVML, DCGM gauges at a URL, or none), the
host (psutil), and the server's /metrics (pointed at each new server as it becomes
ready). The hub polls them without overlap and reports every sample; it keeps the
history the charts draw and, once an interval, reports a :class:`TelemetryStatus` (the
freshness of every source, the server's GPUs, the advice: ``tui.session.readings``). It
follows the current server's events: the run's series and its loads' server-side latency
are recorded into the run (``tui.session.run_series``), and the peaks of a load.

Where the GPU reading comes from is the mode's :class:`GpuPolicy`. A server's /metrics
page that carries DCGM gauges of its own (the simulator's does) is the GPU reading when no
GPU source was given, or ahead of it where the policy says so (attach). Where the GPU
cannot be seen (a remote server with no DCGM URL; the demo before its simulator runs)
the policy's ``absent`` reading says why, and nothing is attributed to a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from tui.domain.events import Exited, Failed, Launched, Ready, ServerEvent
from tui.domain.gpus import gpu_for_attached, released_gpu
from tui.domain.history import TelemetryHistory
from tui.domain.record import RunEvent
from tui.domain.results import BenchResult, RunRecord, TelemetryPeaks
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics, SourceStatus
from tui.session.port import TelemetryStatus
from tui.session.readings import Readings
from tui.session.run_series import RunSeries
from tui.telemetry.poller import Poller, PollFailure

logger = logging.getLogger(__name__)

Emit = Callable[[GpuSample | HostSample | ServerMetrics | TelemetryStatus], None]
Clock = Callable[[], float]
SETTLE_INTERVALS = 3.0
"""A finished load waits this many poll intervals (at least ``MIN_SETTLE_S``) for the
scrape that counts its last requests."""
MIN_SETTLE_S = 3.0
NOT_WATCHING = "no server is ready to read"


class GpuReader(Protocol):
    """A GPU source as the hub polls it (a sync source runs in a thread in its adapter)."""

    async def sample(self) -> GpuSample: ...
    async def aclose(self) -> None: ...


class HostReader(Protocol):
    """The host and a server process tree (psutil)."""

    async def sample(self, server_pid: int | None) -> HostSample: ...
    async def aclose(self) -> None: ...


class MetricsReader(Protocol):
    """A server's /metrics, re-pointed at each server (rates restart with a new target)."""

    def target(self, url: str) -> None: ...
    async def sample(self) -> ServerMetrics: ...
    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class GpuPolicy:
    """Where the GPU panel's reading comes from, beside the mode's GPU source.

    ``absent``: shown while nothing is visible (and the reason). ``page_first``: a server
    page's own GPU gauges win over the GPU source (attach: the simulator's gauges, ahead
    of this machine's NVML). ``simulated``: the page's GPU is the simulator's, which frees
    all its memory when it exits (shown released, never as the last reading).
    ``cuda_visible_devices``: what the mode's servers are launched with (marks their GPUs).
    """

    absent: GpuSample | None = None
    page_first: bool = False
    simulated: bool = False
    cuda_visible_devices: str | None = None


def _no_record(event: RunEvent, run_id: int | None) -> None:
    """Where run telemetry goes when no run book is given (tests of the pollers alone)."""


class TelemetryHub:
    """Polls the mode's sources, reports each sample and a status to ``emit``.

    ``record``: the run book's ``apply`` (run telemetry goes into the runs through it).
    ``trust_flags``: the runs' flags are their servers' own (not when attached to a server
    started elsewhere), so the advisor and the GPU marks may read them.
    """

    def __init__(
        self,
        *,
        emit: Emit,
        interval_s: float = 1.0,
        gpu: GpuReader | None = None,
        host: HostReader | None = None,
        metrics: MetricsReader | None = None,
        policy: GpuPolicy | None = None,
        record: Callable[[RunEvent, int | None], object] = _no_record,
        trust_flags: bool = True,
        clock: Clock = time.monotonic,
    ) -> None:
        self._emit = emit
        self._interval = interval_s
        self._gpu = gpu
        self._host = host
        self._metrics = metrics
        self._policy = policy or GpuPolicy()
        self._trust_flags = trust_flags
        self._clock = clock
        self._readings = Readings(
            interval_s=interval_s,
            clock=clock,
            cuda_visible_devices=self._policy.cuda_visible_devices,
        )
        self._series = RunSeries(record, settle_s=max(MIN_SETTLE_S, SETTLE_INTERVALS * interval_s))
        self._pollers: dict[str, Poller[object]] = {}
        self._peaks: dict[str, float] | None = None
        self._unwatching: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._source_gpu: GpuSample | None = None  # the GPU source's newest reading
        self._page_gpu: GpuSample | None = None  # the watched page's own gauges, while shown
        self._metrics_waiters: list[asyncio.Future[ServerMetrics]] = []

    @property
    def history(self) -> TelemetryHistory:
        """The panels' numbers over the last minutes."""
        return self._readings.history

    @property
    def latest_gpu(self) -> GpuSample | None:
        """The GPU reading shown now."""
        return self._readings.gpu

    @property
    def server_pid(self) -> int | None:
        """The watched server's root pid (the host sample sums its tree)."""
        return self._readings.server_pid

    @server_pid.setter
    def server_pid(self, pid: int | None) -> None:
        self._readings.server_pid = pid

    def start(self) -> None:
        """Start the GPU and host pollers and the status tick (metrics start with a server)."""
        if self._gpu is not None:
            self._poll("gpu", self._gpu.sample, self._on_gpu_source)
        elif self._policy.absent is not None:
            self._show_gpu(self._policy.absent)
        if self._host is not None:
            self._poll("host", self._host_sample, self._on_host)
        if self._ticker is None:
            self._ticker = asyncio.ensure_future(self._tick_forever())

    def status(self) -> TelemetryStatus:
        """What the panels are told now (also reported once an interval)."""
        return self._readings.status()

    # -- the current server -----------------------------------------------------------------
    def follow(
        self, event: ServerEvent, run: RunRecord | None, *, url: str | None, pid: int | None
    ) -> None:
        """Follow the current server's ``event`` (``run``: its run, already updated)."""
        if isinstance(event, Launched):
            self.server_pid = event.pid
            self._new_instance()
            self._begin_run(run)
        elif isinstance(event, Ready):
            if pid is not None and pid != self.server_pid:
                self._new_instance()  # a server taken over (no Launched came before)
            self.server_pid = pid if pid is not None else self.server_pid
            self._begin_run(run)  # a server taken over begins its run's series here
            if url is not None:
                self.watch_server(url)
        elif isinstance(event, Failed | Exited):
            self._series.end()
            self.server_pid = None
            self.unwatch_soon()

    def watch_server(self, url: str) -> None:
        """Poll the server at ``url`` (once ready); a poller already on it carries on, its
        rate and latency windows restarted for the new instance."""
        metrics = self._metrics
        if metrics is None:
            return
        if "metrics" in self._pollers:  # a new instance at the same poller: rates start afresh
            metrics.target(url)
            return
        metrics.target(url)
        self._readings.watching = True
        self._poll("metrics", metrics.sample, self._on_metrics)

    async def unwatch_server(self) -> None:
        """Stop polling the server's /metrics (it stopped, failed, or is being replaced)."""
        poller = self._pollers.pop("metrics", None)
        if poller is None:
            return
        await poller.stop()
        self._readings.watching = False
        gone = ServerMetrics(self._clock(), SourceStatus.UNAVAILABLE, message=NOT_WATCHING)
        self._on_metrics(gone)
        page, self._page_gpu = self._page_gpu, None
        if page is not None and self._policy.simulated:
            # The simulator frees all its GPU memory when it exits: say so, not the last reading.
            self._show_gpu(released_gpu(page, self._clock()), standing=True)
        elif page is not None or self._gpu is None:
            self._show_gpu_fallback()

    def unwatch_soon(self) -> None:
        """:meth:`unwatch_server` from a callback (the server ended); awaited by ``aclose``."""
        if "metrics" in self._pollers and (self._unwatching is None or self._unwatching.done()):
            self._unwatching = asyncio.ensure_future(self.unwatch_server())

    async def next_metrics(self, timeout_s: float | None = None) -> ServerMetrics | None:
        """The next /metrics reading of the watched server (``None``: not watched, or none
        within ``timeout_s``, default three poll intervals): a sweep's prefix-cache counters
        around a load come from here, not from a second scrape."""
        if "metrics" not in self._pollers:
            return None
        waiter: asyncio.Future[ServerMetrics] = asyncio.get_running_loop().create_future()
        self._metrics_waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout_s or 3 * self._interval + 1.0)
        except TimeoutError:
            return None
        finally:
            with contextlib.suppress(ValueError):
                self._metrics_waiters.remove(waiter)

    # -- loads -------------------------------------------------------------------------------
    def begin_load(self) -> None:
        """A load begins: collect its peaks and its server-side latency."""
        self._peaks = {}
        self._series.load_started()

    def end_load(self, result: BenchResult | None) -> TelemetryPeaks:
        """The load ended (``None``: failed): its peaks; its latency is recorded once the
        server has counted its last requests."""
        peaks, self._peaks = self._peaks or {}, None
        self._series.load_finished(result, self._clock())
        return TelemetryPeaks(**peaks)

    async def aclose(self) -> None:
        """Stop every poller, record the current run's series, then close every source."""
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if self._unwatching is not None:
            await asyncio.gather(self._unwatching, return_exceptions=True)
        pollers, self._pollers = list(self._pollers.values()), {}
        for poller in pollers:
            await poller.stop()
        self._series.end()
        for source in (self._gpu, self._host, self._metrics):
            if source is not None:
                await source.aclose()

    # -- internals ------------------------------------------------------------------------------
    def _new_instance(self) -> None:
        """Another server: advice and peaks are that server's own from now on."""
        self._readings.begin_instance()
        if self._peaks is not None:
            self._peaks = {}

    def _begin_run(self, run: RunRecord | None) -> None:
        if run is None or run.id is None:
            return
        self._readings.flags = run.flags if self._trust_flags else None
        self._series.begin(run.id, self._clock())

    def _poll(
        self, name: str, sample: Callable[[], Awaitable[object]], on: Callable[[object], None]
    ) -> None:
        poller: Poller[object] = Poller(
            sample, on, interval=self._interval, name=name, on_failure=self._on_failure
        )
        self._pollers[name] = poller
        poller.start()

    async def _host_sample(self) -> HostSample:
        # A coroutine function, so the poller awaits it on the loop (the adapter threads it).
        assert self._host is not None
        return await self._host.sample(self.server_pid)

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                self._series.tick(self._clock())
                self._emit(self._readings.status())
            except Exception:  # a failed tick must not end the ticks (the marks would freeze)
                logger.exception("telemetry status tick failed")

    def _on_failure(self, failure: PollFailure) -> None:
        if not failure.in_callback:
            self._readings.on_failure(failure.poller, failure.message)

    def _peak(self, key: str, value: float | None) -> None:
        if value is not None and self._peaks is not None:
            self._peaks[key] = max(self._peaks.get(key, value), value)

    def _on_metrics(self, sample: object) -> None:
        assert isinstance(sample, ServerMetrics)
        self._peak("kv_cache_usage", sample.kv_cache_usage)
        self._peak("num_waiting", sample.num_waiting)
        self._peak("generation_tokens_per_s", sample.generation_tokens_per_s)
        self._readings.on_metrics(sample)
        self._series.on_metrics(sample)
        if sample.status is SourceStatus.OK:
            for waiter in self._metrics_waiters:
                if not waiter.done():
                    waiter.set_result(sample)
        self._emit(sample)
        if sample.status is not SourceStatus.UNAVAILABLE:  # not the "no server" marker
            self._gpu_from_page(sample)

    def _gpu_from_page(self, sample: ServerMetrics) -> None:
        """The page's own GPU gauges, where they are the GPU reading (no source, or first)."""
        if self._gpu is not None and not self._policy.page_first:
            return
        if sample.gpu is not None:
            self._page_gpu = sample.gpu
            self._show_gpu(sample.gpu)
        elif self._page_gpu is not None or self._gpu is None:
            self._page_gpu = None  # no gauges on this page (any more)
            if self._gpu is not None:
                if self._source_gpu is not None:
                    self._show_gpu(self._source_gpu)
            elif sample.status is SourceStatus.OK and self._policy.absent is not None:
                self._show_gpu(self._policy.absent)
            else:  # the page could not be read: the GPU reading is down with it
                self._show_gpu(gpu_for_attached(sample, self._clock()))

    def _show_gpu_fallback(self) -> None:
        if self._gpu is not None:
            if self._source_gpu is not None:
                self._show_gpu(self._source_gpu)
        elif self._policy.absent is not None:
            self._show_gpu(self._policy.absent)

    def _on_gpu_source(self, sample: object) -> None:
        assert isinstance(sample, GpuSample)
        self._source_gpu = sample
        if self._page_gpu is None:  # else the server's own gauges are the reading (attach)
            self._show_gpu(sample)

    def _show_gpu(self, sample: GpuSample, *, standing: bool = False) -> None:
        self._readings.on_gpu(sample, standing=standing)
        self._series.on_gpu(sample, self._readings.server_gpus or None)
        for device in sample.devices:
            if self._readings.server_gpus and device.index not in self._readings.server_gpus:
                continue  # another process's GPU: not this load's peak
            self._peak("gpu_util", device.utilization)
            if device.memory_used is not None:
                self._peak("gpu_mem_used_bytes", float(device.memory_used))
        self._emit(sample)

    def _on_host(self, sample: object) -> None:
        assert isinstance(sample, HostSample)
        rss = None if sample.server_rss is None else float(sample.server_rss)
        self._peak("server_rss_bytes", rss)
        self._readings.on_host(sample)
        self._emit(sample)
