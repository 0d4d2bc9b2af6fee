"""The telemetry hub: one instance per source, their pollers, and the peaks of a load.

A mode hands the hub the sources it built (each exactly once; the pre-flight estimator
shares the same GPU source instance): the GPU (NVML, DCGM gauges at a URL, or none), the
host (psutil), and the server's /metrics (pointed at each new server as it becomes
ready). The hub polls them without overlap, reports every sample, and tracks the peaks
of the load in progress for the run record.

Where the GPU cannot be seen (a remote server with no DCGM URL; the demo while no simulator
runs) the hub reports the mode's ``gpu_absent`` sample instead, so the panel says why and
nothing is attributed to a run. A server's /metrics page that carries DCGM gauges of its
own (the simulator does) is the GPU reading when no GPU source was given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from tui.domain.results import TelemetryPeaks
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics, SourceStatus
from tui.telemetry.poller import Poller

Emit = Callable[[GpuSample | HostSample | ServerMetrics], None]


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


class TelemetryHub:
    """Polls the mode's sources, reports each sample to ``emit``, keeps a load's peaks."""

    def __init__(
        self,
        *,
        emit: Emit,
        interval_s: float = 1.0,
        gpu: GpuReader | None = None,
        host: HostReader | None = None,
        metrics: MetricsReader | None = None,
        gpu_absent: GpuSample | None = None,
    ) -> None:
        self._emit = emit
        self._interval = interval_s
        self._gpu = gpu
        self._host = host
        self._metrics = metrics
        self._gpu_absent = gpu_absent
        self._pollers: dict[str, Poller[object]] = {}
        self._peaks: dict[str, float] | None = None
        self._unwatching: asyncio.Task[None] | None = None
        self.server_pid: int | None = None
        """The watched server's root pid (the host sample sums its tree)."""
        self.latest_gpu: GpuSample | None = None

    def start(self) -> None:
        """Start the GPU and host pollers (the server's metrics start with a server)."""
        if self._gpu is not None:
            self._poll("gpu", self._gpu.sample, self._on_gpu)
        elif self._gpu_absent is not None:
            self._on_gpu(self._gpu_absent)
        if self._host is not None:
            host = self._host
            self._poll("host", lambda: host.sample(self.server_pid), self._on_host)

    def watch_server(self, url: str) -> None:
        """Poll the server at ``url`` (once ready); a poller already on it carries on."""
        metrics = self._metrics
        if metrics is None or "metrics" in self._pollers:
            return
        metrics.target(url)
        self._poll("metrics", metrics.sample, self._on_metrics)

    async def unwatch_server(self) -> None:
        """Stop polling the server's /metrics (it stopped, failed, or is being replaced)."""
        poller = self._pollers.pop("metrics", None)
        if poller is not None:
            await poller.stop()
        if self._gpu is None and self._gpu_absent is not None:
            self._on_gpu(self._gpu_absent)  # the server's own gauges went with it

    def unwatch_soon(self) -> None:
        """:meth:`unwatch_server` from a callback (the server ended); awaited by ``aclose``."""
        if "metrics" in self._pollers and (self._unwatching is None or self._unwatching.done()):
            self._unwatching = asyncio.ensure_future(self.unwatch_server())

    def begin_peaks(self) -> None:
        """Start collecting the peaks of a load run."""
        self._peaks = {}

    def end_peaks(self) -> TelemetryPeaks:
        """Stop collecting; the peaks seen since :meth:`begin_peaks`."""
        peaks, self._peaks = self._peaks or {}, None
        return TelemetryPeaks(**peaks)

    async def aclose(self) -> None:
        """Stop every poller, then close every source."""
        if self._unwatching is not None:
            await asyncio.gather(self._unwatching, return_exceptions=True)
        pollers, self._pollers = list(self._pollers.values()), {}
        for poller in pollers:
            await poller.stop()
        for source in (self._gpu, self._host, self._metrics):
            if source is not None:
                await source.aclose()

    # -- internals ------------------------------------------------------------------------------
    def _poll(
        self, name: str, sample: Callable[[], Awaitable[object]], on: Callable[[object], None]
    ) -> None:
        poller: Poller[object] = Poller(sample, on, interval=self._interval, name=name)
        self._pollers[name] = poller
        poller.start()

    def _peak(self, key: str, value: float | None) -> None:
        if value is not None and self._peaks is not None:
            self._peaks[key] = max(self._peaks.get(key, value), value)

    def _on_metrics(self, sample: object) -> None:
        assert isinstance(sample, ServerMetrics)
        self._peak("kv_cache_usage", sample.kv_cache_usage)
        self._peak("num_waiting", sample.num_waiting)
        self._peak("generation_tokens_per_s", sample.generation_tokens_per_s)
        self._emit(sample)
        if self._gpu is None:
            if sample.gpu is not None:
                self._on_gpu(sample.gpu)
            elif sample.status is not SourceStatus.OK and self._gpu_absent is not None:
                self._on_gpu(self._gpu_absent)

    def _on_gpu(self, sample: object) -> None:
        assert isinstance(sample, GpuSample)
        self.latest_gpu = sample
        for device in sample.devices:
            self._peak("gpu_util", device.utilization)
            if device.memory_used is not None:
                self._peak("gpu_mem_used_bytes", float(device.memory_used))
        self._emit(sample)

    def _on_host(self, sample: object) -> None:
        assert isinstance(sample, HostSample)
        rss = None if sample.server_rss is None else float(sample.server_rss)
        self._peak("server_rss_bytes", rss)
        self._emit(sample)

