"""Fake telemetry sources with the shapes the telemetry hub polls (async, closable)."""

from __future__ import annotations

import asyncio
import itertools

from tui.domain.telemetry import (
    GpuDevice,
    GpuSample,
    Histogram,
    HostSample,
    ServerMetrics,
    SourceStatus,
)

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

    def answer(self, sample: GpuSample) -> None:
        """Answer ``sample`` from now on (the scripted ones still due come first)."""
        self._samples = itertools.repeat(None)
        self._last = sample

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


def gpu_box(*used_gib: float, pid: int | None = None, t: float = 0.0) -> GpuSample:
    """One 80 GiB GPU per entry of ``used_gib``; ``pid`` holds memory on the first."""
    devices = tuple(
        GpuDevice(
            index=i,
            name="NVIDIA H100 80GB HBM3",
            memory_used=int(used * GIB),
            memory_total=80 * GIB,
            utilization=50.0,
            processes=((pid, int(used * GIB)),) if pid is not None and i == 0 else (),
        )
        for i, used in enumerate(used_gib)
    )
    return GpuSample(t=t, source="fake", status=SourceStatus.OK, devices=devices)


class HangingGpu:
    """Answers once, then every later read hangs until ``release`` is set (a stuck driver)."""

    def __init__(self, first: GpuSample | None = None) -> None:
        self.first = first or gpu_sample()
        self.reads = 0
        self.release = asyncio.Event()
        self.hanging = asyncio.Event()

    async def sample(self) -> GpuSample:
        """The first reading, then a wait on ``release``."""
        self.reads += 1
        if self.reads > 1:
            self.hanging.set()
            await self.release.wait()
        return self.first

    async def aclose(self) -> None:
        """Nothing to close."""


class FailingGpu:
    """Raises ``error`` on every read (a source with a bug, or a binding that throws)."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.reads = 0

    async def sample(self) -> GpuSample:
        """Raise."""
        self.reads += 1
        raise self.error

    async def aclose(self) -> None:
        """Nothing to close."""


class FakeHost:
    """A host reading that remembers which server pid it was asked about."""

    def __init__(self, server_pids: tuple[int, ...] = ()) -> None:
        self.asked: list[int | None] = []
        self.server_pids = server_pids
        self.closed = False

    async def sample(self, server_pid: int | None) -> HostSample:
        """CPU 50 %, and a 1 GiB tree when there is a server (``server_pids`` its pids)."""
        self.asked.append(server_pid)
        rss = GIB if server_pid is not None else None
        pids = self.server_pids if server_pid is not None else ()
        return HostSample(
            t=0.0, cpu_percent=50.0, server_rss=rss, server_processes=1, server_pids=pids
        )

    async def aclose(self) -> None:
        """Record the close."""
        self.closed = True


class FakeMetrics:
    """A /metrics reader whose next values the test sets; records its targets.

    ``histograms``: the latency histograms of the next page (``ServerLatency`` names);
    ``t``: the next sample's time; ``status``/``message``: a page that could not be read;
    ``preemptions``: the preemption counter (``None``: not on the page).
    ``scrapes`` counts the samples taken.
    """

    def __init__(self, *, gpu: GpuSample | None = None) -> None:
        self.targets: list[str] = []
        self.kv = 0.25
        self.waiting = 0.0
        self.running = 1.0
        self.preemptions: float | None = None
        self.gpu = gpu
        self.t = 0.0
        self.histograms: dict[str, Histogram] = {}
        self.status = SourceStatus.OK
        self.message = ""
        self.scrapes = 0
        self.extra: dict[str, float] = {}  # e.g. the prefix-cache counters' totals
        self.sampled = asyncio.Event()
        self.closed = False

    def target(self, url: str) -> None:
        """Remember where it was pointed."""
        self.targets.append(url)

    async def sample(self) -> ServerMetrics:
        """The current scripted values."""
        self.sampled.set()
        self.scrapes += 1
        if self.status is not SourceStatus.OK:
            return ServerMetrics(t=self.t, status=self.status, message=self.message)
        return ServerMetrics(
            t=self.t,
            status=SourceStatus.OK,
            kv_cache_usage=self.kv,
            num_running=self.running,
            num_waiting=self.waiting,
            preemptions_total=self.preemptions,
            gpu=self.gpu,
            histograms=dict(self.histograms),
            extra=dict(self.extra),
        )

    async def aclose(self) -> None:
        """Record the close."""
        self.closed = True
