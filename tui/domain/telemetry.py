"""Telemetry samples: the GPU, the server's /metrics, the host. Plain data, N/A-tolerant.

``None`` in any numeric field means "not available" (the driver or source can't tell); the
UI prints "N/A" for it rather than a zero that would mislead.

The summaries a run keeps (``ServerLatency``, ``SeriesPoint``) are pydantic models because
they are stored with the run record (``tui.domain.results.RunRecord``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel


class SourceStatus(StrEnum):
    """Whether a source could be read."""

    OK = "ok"
    UNAVAILABLE = "unavailable"  # e.g. no NVIDIA driver: a permanent, explained absence
    DOWN = "down"  # e.g. connection refused: may come back
    STALE = "stale"  # last good sample is too old


@dataclass(frozen=True)
class GpuDevice:
    """One GPU's reading. Memory in bytes, utilization in percent (0-100)."""

    index: int
    name: str
    memory_used: int | None = None
    memory_total: int | None = None
    utilization: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    processes: tuple[tuple[int, int | None], ...] = ()  # (pid, used bytes or None)
    uuid: str | None = None  # "GPU-..." (or "MIG-..."), as CUDA_VISIBLE_DEVICES may name it


@dataclass(frozen=True)
class GpuSample:
    """All GPUs a source sees at time ``t`` (monotonic seconds).

    ``wsl``: read through WSL2's NVML (Windows' WDDM driver), where per-process memory is
    never available: a process's ``None`` reads "N/A (WDDM)", not "unknown".
    """

    t: float
    source: str  # "nvml", "dcgm:<url>", ...
    status: SourceStatus
    devices: tuple[GpuDevice, ...] = ()
    message: str = ""  # why it is unavailable/down, shown as-is ("no NVIDIA driver")
    wsl: bool = False


@dataclass(frozen=True)
class Histogram:
    """One Prometheus histogram at one scrape: cumulative counts per bucket upper bound.

    ``bounds`` ascend and end with ``+inf`` on a well-formed page (``le="+Inf"``); ``counts``
    are cumulative (``_bucket{le=...}``), so ``counts[-1]`` is the number of observations.
    Values in the histogram's unit (seconds for vLLM's latency families). ``created`` is the
    ``_created`` stamp: a different one means the histogram started again (server restart).
    """

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    sum: float = 0.0
    created: float | None = None

    @property
    def count(self) -> float:
        """Observations (the ``+Inf`` bucket), 0 for an empty histogram."""
        return self.counts[-1] if self.counts else 0.0

    @property
    def well_formed(self) -> bool:
        """True when the last bound is ``+Inf`` (PromQL returns NaN otherwise)."""
        return bool(self.bounds) and math.isinf(self.bounds[-1]) and self.bounds[-1] > 0


@dataclass(frozen=True)
class SimInfo:
    """What a simulator says it simulates (``vtc_sim_info``): the GPU and the time scale
    (``speed`` 4: it runs 4x faster than that GPU, every latency and rate scaled by it)."""

    gpu_name: str = ""
    speed: float | None = None

    @property
    def label(self) -> str:
        """``simulated RTX 3080 · 4x time`` (``real time`` at speed 1), for the header."""
        name = self.gpu_name.removeprefix("NVIDIA ").removeprefix("GeForce ") or "GPU"
        if self.speed is None:
            return f"simulated {name}"
        scale = "real time" if self.speed == 1 else f"{self.speed:g}x time"
        return f"simulated {name} · {scale}"


@dataclass(frozen=True)
class ServerMetrics:
    """vLLM's /metrics reduced to what the console shows. Rates are per second.

    Rates need two scrapes; the first sample has ``None`` rates. ``histograms`` holds the
    raw latency histograms by ``ServerLatency`` field name (``ttft``, ``itl``, ...), so a
    run can summarise its own span; ``latency`` is the source's sliding window over them.
    """

    t: float
    status: SourceStatus
    kv_cache_usage: float | None = None  # 0-1
    num_running: float | None = None
    num_waiting: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    prefix_cache_hit_rate: float | None = None  # 0-1, over the last interval
    preemptions_total: float | None = None
    requests_success_total: float | None = None
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    message: str = ""
    gpu: GpuSample | None = None  # DCGM-style gauges found on the same page, if any
    extra: dict[str, float] = field(default_factory=dict)
    histograms: Mapping[str, Histogram] = field(default_factory=dict)
    latency: ServerLatency | None = None
    prefix_caching: bool | None = None  # from vllm:cache_config_info, when the page says
    gpu_memory_utilization: float | None = None  # likewise
    largest_request_tokens: float | None = None  # upper bound, from the request histograms
    sim: SimInfo | None = None  # the server is vtc's simulator (it says so on its page)


@dataclass(frozen=True)
class HostSample:
    """The host and the server's process tree (psutil).

    ``label``: the host's name as the panel titles it ("box (WSL2)" under WSL2).
    """

    t: float
    cpu_percent: float | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    server_rss: int | None = None  # RSS summed over the server's process tree
    server_processes: int | None = None
    server_pids: tuple[int, ...] = ()  # the tree's pids (marks its GPU processes)
    label: str = ""
    status: SourceStatus = SourceStatus.OK
    message: str = ""


class QuantileBound(BaseModel):
    """Where a quantile lies when its histogram cannot place it finer: inside one bucket.

    ``lower`` to ``upper`` in the quantile's unit; ``lower`` 0 reads "below ``upper``"
    (the lowest bucket: interpolating from 0 invents the numbers), ``upper`` infinite reads
    "above ``lower``" (past the highest finite bound).
    """

    lower: float
    upper: float


class LatencyQuantiles(BaseModel):
    """Server-side quantiles of one latency histogram, in milliseconds.

    Interpolated inside buckets as PromQL's ``histogram_quantile`` does, so each value is
    only as fine as its bucket. Where the interpolation is not data (the quantile falls in
    the lowest bucket, in the ``+Inf`` bucket, or in a bucket holding every observation) its
    ``*_bound`` says so, and a display shows the bound (``<300 ms``), not the number.
    ``count``: observations in the window (0: none, quantiles ``None``).
    """

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    count: float | None = None
    mean: float | None = None  # _sum / _count over the window
    p50_bound: QuantileBound | None = None
    p90_bound: QuantileBound | None = None
    p99_bound: QuantileBound | None = None

    def reading(self, name: str) -> tuple[float | None, QuantileBound | None]:
        """The value and the bound of quantile ``name`` (``p50``, ``p90`` or ``p99``)."""
        bounds = {"p50": self.p50_bound, "p90": self.p90_bound, "p99": self.p99_bound}
        values = {"p50": self.p50, "p90": self.p90, "p99": self.p99}
        return values[name], bounds[name]


class ServerLatency(BaseModel):
    """Latency as the server's own /metrics histograms saw it over a window (ms).

    ``window_s``: the window's length; ``None`` means since the server started (a one-shot
    read of the cumulative histograms). Field names follow ``vllm bench serve`` where it has
    one (``ttft``, ``itl``, ``e2el``); ``queue``, ``prefill`` and ``decode`` are vLLM's
    request phase histograms (reference section 3).
    """

    window_s: float | None = 60.0
    ttft: LatencyQuantiles | None = None
    itl: LatencyQuantiles | None = None
    e2el: LatencyQuantiles | None = None
    queue: LatencyQuantiles | None = None
    prefill: LatencyQuantiles | None = None
    decode: LatencyQuantiles | None = None


class SeriesPoint(BaseModel):
    """One downsampled telemetry point, ``t`` seconds after the run was launched.

    Each value is the mean of the samples that fell into the point's time bucket.
    """

    t: float
    kv_cache_usage: float | None = None
    num_running: float | None = None
    num_waiting: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    gpu_mem_used_bytes: float | None = None
    gpu_util: float | None = None
    ttft_p50_ms: float | None = None
