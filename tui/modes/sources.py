"""Telemetry adapters as the hub polls them: async, closable, one instance per source.

The telemetry room's sources come in two flavours (NVML and psutil are synchronous, HTTP
scrapes are async); these adapters give the hub one shape and keep every blocking call in
a worker thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

import httpx

from tui.domain.credentials import Credentials
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics, SourceStatus
from tui.domain.url_credentials import UrlCredential, authorization_header, split_url
from tui.telemetry.dcgm import DcgmGpuSource
from tui.telemetry.host import HostSource
from tui.telemetry.scrape import DEFAULT_DEADLINE_S
from tui.telemetry.vllm_metrics import VllmMetricsSource


def local_client(
    credentials: Credentials | None = None, *, url_credential: UrlCredential | None = None
) -> httpx.AsyncClient:
    """An HTTP client for the console's own scrapes and probes.

    ``trust_env=False``: a proxy from the environment must never sit between the console
    and a server it watches. ``url_credential``: the user:password the URL it talks to
    carried, sent as Basic (it wins over the API key: one Authorization header).
    """
    key = credentials.api_key if credentials is not None else None
    return httpx.AsyncClient(trust_env=False, headers=authorization_header(url_credential, key))


def dcgm_reader(url: str) -> DcgmReader:
    """A DCGM exporter's reader; a user:password in ``url`` goes as Basic, nowhere else."""
    clean, credential = split_url(url)
    return DcgmReader(clean, local_client(url_credential=credential))


class LocalGpu(Protocol):
    """A GPU source on this machine (NVML today): synchronous, shared by the panel, the
    pre-flight estimate, the wait for a stopped server's memory and the run's facts."""

    def sample(self) -> GpuSample:
        """One reading (never raises)."""
        ...

    def versions(self) -> tuple[str | None, str | None]:
        """The driver's and the runtime's versions, where known."""
        ...

    def close(self) -> None:
        """Release the library."""
        ...


class NvmlReader:
    """A :class:`LocalGpu` (NVML), read in a worker thread; shared with the pre-flight estimate."""

    def __init__(self, nvml: LocalGpu) -> None:
        self.nvml = nvml

    async def sample(self) -> GpuSample:
        """One reading (never raises: NVML's own N/A handling)."""
        return await asyncio.to_thread(self.nvml.sample)

    async def aclose(self) -> None:
        """Shut NVML down."""
        await asyncio.to_thread(self.nvml.close)


class DcgmReader:
    """GPU gauges of a DCGM exporter at a URL."""

    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient,
        *,
        timeout_s: float = DEFAULT_DEADLINE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = DcgmGpuSource(url, client, timeout_s=timeout_s, clock=clock)
        self._client = client

    async def sample(self) -> GpuSample:
        """One scrape (never raises)."""
        return await self._source.sample()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


class HostReader:
    """psutil: the host, and the watched server's process tree."""

    def __init__(self) -> None:
        self._host = HostSource(None)

    async def sample(self, server_pid: int | None) -> HostSample:
        """One reading of the host and ``server_pid``'s tree (in a thread)."""
        self._host.root_pid = server_pid
        return await asyncio.to_thread(self._host.sample)

    async def aclose(self) -> None:
        """Nothing to release."""


class MetricsReader:
    """The watched server's /metrics; a new target starts the rates afresh."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client
        self._source: VllmMetricsSource | None = None

    def target(self, url: str) -> None:
        """Scrape ``url``'s ``/metrics`` from now on."""
        metrics_url = url.rstrip("/") + "/metrics"
        if self._source is None or self._source.url != metrics_url:
            self._source = VllmMetricsSource(metrics_url, self._client)
        else:
            self._source.reset()

    async def sample(self) -> ServerMetrics:
        """One scrape of the target (DOWN before there is one)."""
        if self._source is None:
            return ServerMetrics(t=time.monotonic(), status=SourceStatus.DOWN, message="no server")
        return await self._source.sample()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()
