"""``vtc top``'s watcher: a server's telemetry polled and reported headless.

The same sources and pure functions as the console's panels: the /metrics source
(bounded scrapes, 60 s latency window), the GPU reader the composition root chose
(``tui.modes.adapters.gpu_source``: ``--gpu-metrics-url``, else the page's own DCGM gauges,
else this machine's NVML for a server on loopback, else "remote GPU not visible"),
freshness, history and advice. Polling runs on ``tui.telemetry.poller.Poller`` while
reports are made on their own tick, so a scrape that hangs shows as ``stale`` after two
intervals and ``down`` at its deadline, as on the console. The command itself is
``tui/app/top.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx

from tui.domain.advice import AdviceInputs, advise
from tui.domain.errors import VtcError
from tui.domain.gpus import gpu_for_attached, server_gpu_indices
from tui.domain.history import TelemetryHistory
from tui.domain.quantiles import latency_of
from tui.domain.telemetry import GpuSample, ServerLatency, ServerMetrics, SourceStatus
from tui.domain.url_credentials import authorization_header, split_url
from tui.telemetry.poller import Poller
from tui.telemetry.scrape import check_metrics_url
from tui.telemetry.top_report import TopReport, build_report
from tui.telemetry.vllm_metrics import VllmMetricsSource

DEFAULT_INTERVAL_S = 1.0
DEFAULT_DEADLINE_S = 10.0
ADVICE_WINDOW_S = 60.0


def metrics_url(url: str) -> str:
    """``url`` itself when it names a path, else its ``/metrics``; ``VtcError`` if not http(s)."""
    parts = urlsplit(url.strip())
    if parts.path in ("", "/"):
        parts = parts._replace(path="/metrics")
    try:
        return check_metrics_url(urlunsplit(parts))
    except ValueError as exc:
        raise VtcError(str(exc)) from exc


class GpuFeed(Protocol):
    """A GPU reader as the watcher polls it (one instance, closed when the watch ends)."""

    async def sample(self) -> GpuSample:
        """One reading (never raises)."""
        ...

    async def aclose(self) -> None:
        """Release what the reader holds."""
        ...


class TopWatcher:
    """Polls one server's /metrics (and its GPU) and makes reports on demand.

    ``scrape_deadline_s`` bounds each scrape. ``gpu``: the GPU reader the composition root
    chose (a DCGM exporter, this machine's NVML, or ``None``); ``page_first``: the page's own
    GPU gauges win over it (everything but a DCGM URL the operator named).
    """

    def __init__(
        self,
        url: str,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        scrape_deadline_s: float = 3.0,
        gpu: GpuFeed | None = None,
        page_first: bool = True,
        window_s: float | None = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # A user:password in the URL is taken out and sent as Basic to that URL only (the
        # GPU feed's URL is cleaned where it is built: tui.modes.adapters.gpu_source).
        clean, credential = split_url(url)
        self.url = metrics_url(clean)
        self.interval_s = interval_s
        self._clock = clock
        self._client = httpx.AsyncClient(trust_env=False, headers=authorization_header(credential))
        self._metrics = VllmMetricsSource(
            self.url,
            self._client,
            timeout_s=scrape_deadline_s,
            window_s=window_s or 60.0,
            clock=clock,
        )
        self._gpu = gpu
        self._page_first = page_first
        self.window_s = window_s
        self.history = TelemetryHistory()
        self.latest: ServerMetrics | None = None
        self.good: ServerMetrics | None = None
        self._gpu_reading: GpuSample | None = None  # the DCGM URL's or this machine's NVML
        self.rounds = 0
        self._changed = asyncio.Event()
        self._pollers: list[Poller[Any]] = []

    def _on_metrics(self, sample: ServerMetrics) -> None:
        self.rounds += 1
        self.latest = sample
        if sample.status is SourceStatus.OK and not sample.message:
            self.good = sample
        self.history.record_metrics(sample)
        self._changed.set()

    def _on_gpu(self, sample: GpuSample) -> None:
        self._gpu_reading = sample

    def gpu(self, now: float) -> GpuSample | None:
        """The GPU reading to show: the DCGM URL's, else as ``gpu_for_attached`` picks."""
        if not self._page_first:
            return self._gpu_reading
        if self.latest is None:
            return self._gpu_reading  # this machine's, while the page has not answered
        return gpu_for_attached(self.latest, now, local=self._gpu_reading)

    def start(self) -> None:
        """Start polling (needs a running event loop)."""
        self._pollers = [
            Poller(self._metrics.sample, self._on_metrics, interval=self.interval_s, name="top")
        ]
        if self._gpu is not None:
            self._pollers.append(
                Poller(self._gpu.sample, self._on_gpu, interval=self.interval_s, name="top-gpu")
            )
        for poller in self._pollers:
            poller.start()

    async def wait_for_readings(self, count: int) -> None:
        """Until ``count`` /metrics rounds ended, or one ended down."""
        while self.rounds < count:
            if self.latest is not None and self.latest.status is not SourceStatus.OK:
                return
            self._changed.clear()
            await self._changed.wait()

    async def stop(self) -> None:
        """Stop polling and close what was opened."""
        for poller in self._pollers:
            await poller.stop()
        await self._client.aclose()
        if self._gpu is not None:
            await self._gpu.aclose()

    def latency(self) -> ServerLatency | None:
        """The window's quantiles, or the lifetime's for an unbounded report."""
        if self.good is None:
            return None
        if self.window_s is None:
            return latency_of(self.good.histograms, None)
        return self.good.latency

    def report(self, *, no_answer: str = "") -> TopReport:
        """The report now."""
        now = self._clock()
        recent = self.history.recent_metrics(now - ADVICE_WINDOW_S)
        gpu = self.gpu(now)
        indices = server_gpu_indices(gpu.devices) if gpu is not None else frozenset()
        advice = advise(AdviceInputs(recent, gpu=gpu, server_gpus=indices))
        return build_report(
            self.url,
            latest=self.latest,
            good=self.good,
            latency=self.latency(),
            gpu=gpu,
            now=now,
            interval_s=self.interval_s,
            advice=advice,
            no_answer=no_answer,
        )
