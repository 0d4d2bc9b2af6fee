"""GPU readings from DCGM-exporter style gauges on a Prometheus /metrics page.

dcgm-exporter publishes one gauge per field and GPU, labelled ``gpu`` (index), ``UUID``,
``modelName``, ``device``, ``pci_bus_id``, ``Hostname`` (and ``GPU_I_ID``/``GPU_I_PROFILE`` for MIG
instances, ``pod``/``namespace``/``container`` under Kubernetes). Units as dcgm-exporter's
default counters file states them: framebuffer fields in MiB, utilization in percent,
temperature in C, power in W.

``gpu_from_families`` is pure so that both ``DcgmGpuSource`` and the vLLM metrics source (the
simulator serves vLLM's and DCGM's gauges on one page) read the page the same way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import httpx
from prometheus_client.metrics_core import Metric

from tui.domain.telemetry import GpuDevice, GpuSample, SourceStatus
from tui.telemetry.scrape import DEFAULT_DEADLINE_S, ScrapeError, check_metrics_url, scrape

MIB = 1024 * 1024

FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"  # newer exporters; part of the total, not of "used"
FB_TOTAL = "DCGM_FI_DEV_FB_TOTAL"  # not in the default counters file, but honoured if present
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"

_FIELDS = (FB_USED, FB_FREE, FB_RESERVED, FB_TOTAL, GPU_UTIL, GPU_TEMP, POWER_USAGE)


@dataclass
class _Gpu:
    order: int
    gpu_label: str
    name: str
    uuid: str
    values: dict[str, float] = field(default_factory=dict)


def gpu_from_families(families: Iterable[Metric], t: float, source: str) -> GpuSample | None:
    """Build a ``GpuSample`` from parsed families, or ``None`` if the page has no DCGM gauges.

    One device per (``gpu``, ``UUID``, ``GPU_I_ID``) label set, in page order. When the same
    GPU appears more than once for a field (one series per Kubernetes pod sharing it), the
    first value is kept: the gauges describe the device, not the pod, so summing would
    double-count.
    """
    gpus: dict[tuple[str, str, str], _Gpu] = {}
    for family in families:
        for s in family.samples:
            if s.name not in _FIELDS:
                continue
            labels = s.labels
            key = (labels.get("gpu", ""), labels.get("UUID", ""), labels.get("GPU_I_ID", ""))
            gpu = gpus.get(key)
            if gpu is None:
                gpu = _Gpu(len(gpus), key[0], _model_name(labels), key[1])
                gpus[key] = gpu
            if s.name not in gpu.values and math.isfinite(s.value):
                gpu.values[s.name] = float(s.value)
    if not gpus:
        return None
    devices = tuple(_device(g) for g in gpus.values())
    return GpuSample(t=t, source=source, status=SourceStatus.OK, devices=devices)


def _model_name(labels: dict[str, str]) -> str:
    name = labels.get("modelName") or labels.get("device") or "GPU"
    profile = labels.get("GPU_I_PROFILE")
    return f"{name} MIG {profile}" if profile else name


def _device(gpu: _Gpu) -> GpuDevice:
    v = gpu.values
    used = _mib(v.get(FB_USED))
    total = _mib(v.get(FB_TOTAL))
    if total is None and FB_USED in v and FB_FREE in v:
        total = _mib(v[FB_USED] + v[FB_FREE] + v.get(FB_RESERVED, 0.0))
    index = int(gpu.gpu_label) if gpu.gpu_label.isdigit() else gpu.order
    return GpuDevice(
        index=index,
        name=gpu.name,
        memory_used=used,
        memory_total=total,
        utilization=v.get(GPU_UTIL),
        temperature_c=v.get(GPU_TEMP),
        power_w=v.get(POWER_USAGE),
        uuid=gpu.uuid or None,
    )


def _mib(value: float | None) -> int | None:
    return None if value is None else round(value * MIB)


class DcgmGpuSource:
    """GPU source reading a dcgm-exporter (or compatible) /metrics URL.

    ``client`` is injected (tests pass one built on ``httpx.MockTransport``); when omitted an
    ``httpx.AsyncClient`` is created on first use and closed by ``aclose()``.
    """

    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient | None = None,
        *,
        timeout_s: float = DEFAULT_DEADLINE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = check_metrics_url(url)
        self.source = f"dcgm:{url}"
        self._client = client
        self._owns_client = client is None
        self._timeout_s = timeout_s
        self._clock = clock

    async def sample(self) -> GpuSample:
        """Scrape once. Never raises: unreachable pages give status DOWN with the reason."""
        if self._client is None:
            self._client = httpx.AsyncClient()
        source = self.source
        try:
            found = await scrape(
                self._client,
                self.url,
                lambda families, t: gpu_from_families(families, t, source),
                deadline_s=self._timeout_s,
                clock=self._clock,
            )
        except ScrapeError as exc:
            return GpuSample(
                t=self._clock(), source=self.source, status=SourceStatus.DOWN, message=str(exc)
            )
        if found is None:
            return GpuSample(
                t=self._clock(),
                source=self.source,
                status=SourceStatus.UNAVAILABLE,
                message=f"no DCGM_FI_DEV_* gauges at {self.url}",
            )
        return found

    async def aclose(self) -> None:
        """Close the HTTP client if this source created it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
