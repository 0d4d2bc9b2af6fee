"""The simulator's /metrics page: vLLM 0.32's families, its HTTP metrics, DCGM GPU gauges.

Every ``vllm:`` family of the captured real pages (:mod:`tui.sim.metric_tables`), with
vLLM's names, help texts, labels (``model_name``, ``engine``) and buckets, from the first
scrape. Each server gets a fresh ``CollectorRegistry`` so two simulators in one process
(tests) never share counters. With ``--disable-log-stats`` vLLM registers none of its
``vllm:`` metrics; the ``http_*`` families stay (the instrumentator registers them anyway),
and so do the DCGM gauges, which stand for a separate exporter on the same host.

- ``vllm:estimated_{flops,read_bytes,write_bytes}_per_gpu`` exist on every page and count
  only with ``--enable-mfu-metrics`` (the cost model's per-step FLOPs and bytes);
- ``vllm:lora_requests_info`` is registered with ``--enable-lora`` only, as in vLLM;
- ``vtc_sim_info`` (not a vLLM family: peers ignore it) is a gauge at 1 whose labels say
  what is simulated: ``gpu`` (catalog key), ``gpu_name``, ``num_gpus``, ``speed`` (the
  ``--sim-speed`` time scale), ``timing`` (``model`` or ``fixed``) and ``tokenizer``
  (``exact`` with the model's ``tokenizer.json``, else ``approximate``). A console reads it
  to say when numbers are scaled.

DCGM gauges use dcgm-exporter's names, units and labels (``gpu``, ``UUID``, ``pci_bus_id``,
``device``, ``modelName``, ``Hostname``): framebuffer in MiB, utilization in percent.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Summary,
    generate_latest,
)
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from tui.sim.metric_tables import (
    CACHE_CONFIG_DEFAULTS,
    CHILDREN,
    FAMILIES,
    HTTP_HIGHR_BUCKETS,
    HTTP_LOWR_BUCKETS,
    SLEEP_STATES,
    Family,
    bucket_values,
)
from tui.sim.offload_tables import CONFIG_INFO, offload_families

SIM_INFO_LABELS = ("gpu", "gpu_name", "num_gpus", "speed", "timing", "tokenizer")


@dataclass(frozen=True)
class GpuGaugeSource:
    """Callables the DCGM gauges read at scrape time, for one GPU."""

    index: int
    uuid: str
    model_name: str
    pci_bus_id: str
    fb_used_mib: Callable[[], float]
    fb_free_mib: Callable[[], float]
    util_percent: Callable[[], float]
    mem_copy_util_percent: Callable[[], float]
    temperature_c: Callable[[], float]
    power_w: Callable[[], float]


class HttpMetrics:
    """prometheus-fastapi-instrumentator's default families, as vLLM registers them."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "http_requests_total",
            "Total number of requests by method, status and handler.",
            ["handler", "method", "status"],
            registry=registry,
        )
        size_doc = (
            "Content length of {} by handler. Only value of header is respected. Otherwise "
            "ignored. No percentile calculated. "
        )
        self.request_size = Summary(
            "http_request_size_bytes",
            size_doc.format("incoming requests"),
            ["handler"],
            registry=registry,
        )
        self.response_size = Summary(
            "http_response_size_bytes",
            size_doc.format("outgoing responses"),
            ["handler"],
            registry=registry,
        )
        self.highr = Histogram(
            "http_request_duration_highr_seconds",
            "Latency with many buckets but no API specific labels. Made for more accurate "
            "percentile calculations. ",
            buckets=HTTP_HIGHR_BUCKETS,
            registry=registry,
        )
        self.lowr = Histogram(
            "http_request_duration_seconds",
            "Latency with only few buckets by handler. Made to be only used if aggregation by "
            "handler is important. ",
            ["handler", "method"],
            buckets=HTTP_LOWR_BUCKETS,
            registry=registry,
        )

    def observe(
        self,
        handler: str,
        method: str,
        status: int,
        seconds: float,
        request_bytes: int,
        response_bytes: int,
    ) -> None:
        """Record one finished request (status grouped as ``2xx``, like the instrumentator)."""
        self.requests.labels(handler, method, f"{status // 100}xx").inc()
        self.request_size.labels(handler).observe(request_bytes)
        self.response_size.labels(handler).observe(response_bytes)
        self.highr.observe(seconds)
        self.lowr.labels(handler, method).observe(seconds)


class SimMetrics:
    """Every metric one simulated server exposes, in its own registry.

    Each ``vllm:`` family of :data:`~tui.sim.metric_tables.FAMILIES` is an attribute named
    by its ``attr`` (``metrics.ttft``, ``metrics.prefix_hits``, ...).
    """

    def __init__(
        self,
        model_name: str,
        max_model_len: int,
        cache_info: dict[str, str],
        log_stats: bool = True,
        hostname: str | None = None,
        lora: int | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.log_stats = log_stats
        self.hostname = hostname or socket.gethostname()
        self.registry.register(GC_COLLECTOR)
        PlatformCollector(registry=self.registry)
        ProcessCollector(registry=self.registry)
        self._labels = {"model_name": model_name, "engine": "0"}
        self._dcgm: dict[str, Gauge] = {}
        self._offload_info: tuple[Any, dict[str, str]] | None = None  # 0.33, until a step
        self._families: dict[str, Any] = {}
        self.lora_info: Gauge | None = None
        self._max_lora = lora
        if log_stats:
            for family in FAMILIES:
                self._families[family.attr] = self._register(family, max_model_len)
            self._materialise()
            self._cache_config(cache_info)
            if lora is not None:
                self.lora_info = Gauge(
                    "vllm:lora_requests_info",
                    "Running stats on lora requests.",
                    ["max_lora", "waiting_lora_adapters", "running_lora_adapters"],
                    registry=self.registry,
                )
        self.http = HttpMetrics(self.registry)
        self.sim_info = Gauge(
            "vtc_sim_info",
            "What vtc-sim simulates (not a vLLM metric): the GPU, the time scale "
            "(--sim-speed), the timing source and the tokenizer.",
            list(SIM_INFO_LABELS),
            registry=self.registry,
        )

    def __getattr__(self, name: str) -> Any:
        # Families are created from the table; unknown names are a programming error.
        families = self.__dict__.get("_families", {})
        if name in families:
            return families[name]
        raise AttributeError(name)

    def _register(self, family: Family, max_model_len: int) -> Any:
        names = ["model_name", "engine"] if family.engine_label else ["model_name"]
        names.extend(family.labels)
        r = self.registry
        if family.kind == "gauge":
            return Gauge(family.name, family.doc, names, registry=r)
        if family.kind == "counter":
            return Counter(family.name, family.doc, names, registry=r)
        assert family.buckets is not None
        buckets = bucket_values(family.buckets, max_model_len)
        return Histogram(family.name, family.doc, names, buckets=buckets, registry=r)

    def _materialise(self) -> None:
        """Create every labelled child so the first scrape lists them at 0, as vLLM does."""
        for family in FAMILIES:
            metric = self._families[family.attr]
            base = (
                self._labels if family.engine_label else {"model_name": self._labels["model_name"]}
            )
            if family.attr == "sleep_state":
                for state in SLEEP_STATES:
                    metric.labels(**base, sleep_state=state).set(1 if state == "awake" else 0)
            elif family.attr in CHILDREN:
                label, values = CHILDREN[family.attr]
                for value in values:
                    metric.labels(**base, **{label: value})
            else:
                metric.labels(**base)

    def _cache_config(self, cache_info: dict[str, str]) -> None:
        values = {**CACHE_CONFIG_DEFAULTS, **cache_info, "engine": "0"}
        info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            sorted(values),
            registry=self.registry,
        )
        info.labels(**values).set(1)

    def publish_kv_offload(
        self, version: str, size_bytes: int, bytes_per_block: int, block_size: int
    ) -> None:
        """Register the families ``--kv-offloading-size`` adds on vLLM ``version``, with the
        series the real server has from the start (:mod:`tui.sim.offload_tables`); 0.33's
        ``vllm:kv_offload_config_info`` gets its series at the first step
        (:meth:`kv_offload_step`). The simulator models no offloading traffic, so the
        transfer families stay without series, as a real idle server's do."""
        for family in offload_families(version):
            names = ["model_name", "engine", *family.labels]
            r = self.registry
            metric: Any
            if family.kind == "gauge":
                metric = Gauge(family.name, family.doc, names, registry=r)
            elif family.kind == "counter":
                metric = Counter(family.name, family.doc, names, registry=r)
            else:
                metric = Histogram(
                    family.name, family.doc, names, buckets=family.buckets or (), registry=r
                )
            for values in family.children:
                metric.labels(**self._labels, **dict(zip(family.labels, values, strict=True)))
            if family.name == CONFIG_INFO:
                chunks = size_bytes // max(1, bytes_per_block)  # one block per chunk here
                info = (str(chunks), "1", str(chunks * bytes_per_block), str(chunks * block_size))
                self._offload_info = (metric, dict(zip(family.labels, info, strict=True)))

    def kv_offload_step(self) -> None:
        """An engine step: 0.33's offload config series appears at the first one."""
        if self._offload_info is not None:
            metric, values = self._offload_info
            metric.labels(**self._labels, **values).set(1)
            self._offload_info = None

    @property
    def labels(self) -> dict[str, str]:
        """``model_name`` and ``engine`` label values."""
        return dict(self._labels)

    def set_sim_info(
        self, gpu: str, gpu_name: str, num_gpus: int, speed: float, timing: str, tokenizer: str
    ) -> None:
        """Publish ``vtc_sim_info`` (the simulated machine and time scale)."""
        self.sim_info.labels(
            gpu=gpu,
            gpu_name=gpu_name,
            num_gpus=str(num_gpus),
            speed=f"{speed:g}",
            timing=timing,
            tokenizer=tokenizer,
        ).set(1)

    def bind_gauges(
        self,
        running: Callable[[], float],
        waiting: Callable[[], float],
        kv_usage: Callable[[], float],
        deferred: Callable[[], float] | None = None,
    ) -> None:
        """Make the engine gauges read live engine state at scrape time."""
        if not self.log_stats:
            return
        held = deferred or (lambda: 0.0)
        self.running.labels(**self._labels).set_function(running)
        self.waiting.labels(**self._labels).set_function(waiting)
        by_reason = self.waiting_by_reason
        by_reason.labels(**self._labels, reason="capacity").set_function(
            lambda: max(0.0, waiting() - held())
        )
        by_reason.labels(**self._labels, reason="deferred").set_function(held)
        self.kv_usage.labels(**self._labels).set_function(kv_usage)

    def record_lora(self, running: list[str], waiting: list[str]) -> None:
        """``vllm:lora_requests_info``: the adapters running and waiting, stamped now."""
        if self.lora_info is None:
            return
        self.lora_info.labels(
            max_lora=str(self._max_lora),
            waiting_lora_adapters=",".join(waiting),
            running_lora_adapters=",".join(running),
        ).set(time.time())

    def add_gpu(self, gpu: GpuGaugeSource) -> None:
        """Publish one GPU's DCGM-exporter gauges."""
        if not self._dcgm:
            names = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"]
            for key, doc in (
                ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
                ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
                ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
                ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %)."),
                ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
                ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
            ):
                self._dcgm[key] = Gauge(key, doc, names, registry=self.registry)
        labels = {
            "gpu": str(gpu.index),
            "UUID": gpu.uuid,
            "pci_bus_id": gpu.pci_bus_id,
            "device": f"nvidia{gpu.index}",
            "modelName": gpu.model_name,
            "Hostname": self.hostname,
        }
        for key, fn in (
            ("DCGM_FI_DEV_FB_USED", gpu.fb_used_mib),
            ("DCGM_FI_DEV_FB_FREE", gpu.fb_free_mib),
            ("DCGM_FI_DEV_GPU_UTIL", gpu.util_percent),
            ("DCGM_FI_DEV_MEM_COPY_UTIL", gpu.mem_copy_util_percent),
            ("DCGM_FI_DEV_GPU_TEMP", gpu.temperature_c),
            ("DCGM_FI_DEV_POWER_USAGE", gpu.power_w),
        ):
            self._dcgm[key].labels(**labels).set_function(fn)

    def render(self) -> bytes:
        """The Prometheus text page."""
        return generate_latest(self.registry)
