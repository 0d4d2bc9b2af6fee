"""Telemetry samples: the GPU, the server's /metrics, the host. Plain data, N/A-tolerant.

``None`` in any numeric field means "not available" (the driver or source can't tell); the
UI prints "N/A" for it rather than a zero that would mislead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


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


@dataclass(frozen=True)
class GpuSample:
    """All GPUs a source sees at time ``t`` (monotonic seconds)."""

    t: float
    source: str  # "nvml", "dcgm:<url>", ...
    status: SourceStatus
    devices: tuple[GpuDevice, ...] = ()
    message: str = ""  # why it is unavailable/down, shown as-is ("no NVIDIA driver")


@dataclass(frozen=True)
class ServerMetrics:
    """vLLM's /metrics reduced to what the console shows. Rates are per second.

    Rates need two scrapes; the first sample has ``None`` rates.
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


@dataclass(frozen=True)
class HostSample:
    """The host and the server's process tree (psutil)."""

    t: float
    cpu_percent: float | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    server_rss: int | None = None  # RSS summed over the server's process tree
    server_processes: int | None = None
