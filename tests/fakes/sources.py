"""Fake telemetry sources with the shapes the telemetry hub polls (async, closable)."""

from __future__ import annotations

import asyncio
import itertools

from tui.domain.telemetry import GpuDevice, GpuSample, HostSample, ServerMetrics, SourceStatus

GIB = 1024**3


def gpu_sample(used_gib: float = 8.0, util: float = 90.0, t: float = 0.0) -> GpuSample:
    """One GPU, ``used_gib`` of 10 GiB in use."""
    device = GpuDevice(
        index=0,
        name="Fake GPU",
        memory_used=int(used_gib * GIB),
        memory_total=10 * GIB,
        utilization=util,
    )
    return GpuSample(t=t, source="fake", status=SourceStatus.OK, devices=(device,))


class FakeGpu:
    """Returns ``samples`` in turn (the last one forever); counts its reads."""

    def __init__(self, *samples: GpuSample) -> None:
        self._samples = itertools.chain(samples or (gpu_sample(),), itertools.repeat(None))
        self._last = samples[-1] if samples else gpu_sample()
        self.reads = 0
        self.closed = False

    async def sample(self) -> GpuSample:
        """The next scripted sample."""
        self.reads += 1
        nxt = next(self._samples)
        if nxt is not None:
            self._last = nxt
        return self._last

    async def aclose(self) -> None:
        """Record the close."""
        self.closed = True


class FakeHost:
    """A host reading that remembers which server pid it was asked about."""

    def __init__(self) -> None:
        self.asked: list[int | None] = []
        self.closed = False

    async def sample(self, server_pid: int | None) -> HostSample:
        """CPU 50 %, and a 1 GiB tree when there is a server."""
        self.asked.append(server_pid)
        rss = GIB if server_pid is not None else None
        return HostSample(t=0.0, cpu_percent=50.0, server_rss=rss, server_processes=1)

    async def aclose(self) -> None:
        """Record the close."""
        self.closed = True


class FakeMetrics:
    """A /metrics reader whose next values the test sets; records its targets."""

    def __init__(self, *, gpu: GpuSample | None = None) -> None:
        self.targets: list[str] = []
        self.kv = 0.25
        self.waiting = 0.0
        self.gpu = gpu
        self.sampled = asyncio.Event()
        self.closed = False

    def target(self, url: str) -> None:
        """Remember where it was pointed."""
        self.targets.append(url)

    async def sample(self) -> ServerMetrics:
        """The current scripted values."""
        self.sampled.set()
        return ServerMetrics(
            t=0.0,
            status=SourceStatus.OK,
            kv_cache_usage=self.kv,
            num_waiting=self.waiting,
            gpu=self.gpu,
        )

    async def aclose(self) -> None:
        """Record the close."""
        self.closed = True
