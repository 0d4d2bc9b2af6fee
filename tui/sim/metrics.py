"""The simulator's /metrics page: vLLM's engine metrics plus dcgm-exporter GPU gauges.

vLLM names, help texts, labels (``model_name``, ``engine``) and buckets follow reference
section 3 and the CPU captures' ``metrics_*.txt``. Each server gets a fresh
``CollectorRegistry`` so two simulators in one process (tests) never share counters. With
``--disable-log-stats`` vLLM registers none of its ``vllm:`` metrics; the DCGM gauges stay,
because they stand for a separate exporter on the same host.

DCGM gauges use dcgm-exporter's names, units and labels (``gpu``, ``UUID``, ``pci_bus_id``,
``device``, ``modelName``, ``Hostname``): framebuffer in MiB, utilization in percent.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

# v1/metrics/buckets.py (reference 3): latency, TTFT, ITL, iteration tokens.
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
N_BUCKETS = (1, 2, 5, 10, 20)
PREEMPTION_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


def buckets_1_2_5(max_value: int) -> list[float]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value`` (``v1/metrics/buckets.py:195-239``)."""
    out: list[float] = []
    exp = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exp
            if v > max_value:
                return out
            out.append(float(v))
        exp += 1


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


class SimMetrics:
    """Every metric one simulated server exposes, in its own registry."""

    def __init__(
        self,
        model_name: str,
        max_model_len: int,
        cache_info: dict[str, str],
        log_stats: bool = True,
        hostname: str | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.log_stats = log_stats
        self.hostname = hostname or socket.gethostname()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.registry.register(GC_COLLECTOR)
        self._labels = {"model_name": model_name, "engine": "0"}
        self._dcgm: dict[str, Gauge] = {}
        if not log_stats:
            return
        r, ln = self.registry, ["model_name", "engine"]

        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, [*ln, *extra], registry=r)

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, [*ln, *extra], registry=r)

        def hist(name: str, doc: str, buckets: tuple[float, ...] | list[float]) -> Histogram:
            return Histogram(name, doc, ln, buckets=buckets, registry=r)

        self.running = gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        )
        self.waiting = gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        )
        self.waiting_by_reason = gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
            "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, "
            "KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
            ("reason",),
        )
        sleep = gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
            "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep "
            "level 2.",
            ("sleep_state",),
        )
        for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            sleep.labels(**self._labels, sleep_state=state).set(value)
        self.kv_usage = gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."
        )
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        )
        self.prefix_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        self.preemptions = counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        )
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.prompt_by_source = counter(
            "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", ("source",)
        )
        self.prompt_cached = counter(
            "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external)."
        )
        self.generation_tokens = counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        self.success = counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            ("finished_reason",),
        )
        len_buckets = buckets_1_2_5(max_model_len)
        self.req_prompt_tokens = hist(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", len_buckets
        )
        self.req_gen_tokens = hist(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", len_buckets
        )
        self.iteration_tokens = hist(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            ITERATION_BUCKETS,
        )
        self.max_gen_tokens = hist(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            len_buckets,
        )
        self.params_n = hist(
            "vllm:request_params_n", "Histogram of the n request parameter.", N_BUCKETS
        )
        self.params_max_tokens = hist(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            len_buckets,
        )
        self.ttft = hist(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS,
        )
        self.itl = hist(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS,
        )
        self.tpot = hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = hist(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            E2E_BUCKETS,
        )
        self.queue_time = hist(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            E2E_BUCKETS,
        )
        self.inference_time = hist(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            E2E_BUCKETS,
        )
        self.prefill_time = hist(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            E2E_BUCKETS,
        )
        self.decode_time = hist(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            E2E_BUCKETS,
        )
        self.req_preemptions = hist(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            PREEMPTION_BUCKETS,
        )
        self.prefill_kv_computed = hist(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            len_buckets,
        )
        info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            sorted([*cache_info, "engine"]),
            registry=r,
        )
        info.labels(**{**cache_info, "engine": "0"}).set(1)
        # Materialise every labelled child so the first scrape lists them at 0, as vLLM does.
        for reason in ("capacity", "deferred"):
            self.waiting_by_reason.labels(**self._labels, reason=reason)
        for source in ("local_compute", "local_cache_hit", "external_kv_transfer"):
            self.prompt_by_source.labels(**self._labels, source=source)
        for reason in FINISH_REASONS:
            self.success.labels(**self._labels, finished_reason=reason)
        for m in (
            self.prefix_queries,
            self.prefix_hits,
            self.preemptions,
            self.prompt_tokens,
            self.prompt_cached,
            self.generation_tokens,
            self.running,
            self.waiting,
            self.kv_usage,
        ):
            m.labels(**self._labels)
        for h in (
            self.req_prompt_tokens,
            self.req_gen_tokens,
            self.iteration_tokens,
            self.max_gen_tokens,
            self.params_n,
            self.params_max_tokens,
            self.ttft,
            self.itl,
            self.tpot,
            self.e2e,
            self.queue_time,
            self.inference_time,
            self.prefill_time,
            self.decode_time,
            self.req_preemptions,
            self.prefill_kv_computed,
        ):
            h.labels(**self._labels)

    @property
    def labels(self) -> dict[str, str]:
        """``model_name`` and ``engine`` label values."""
        return dict(self._labels)

    def bind_gauges(
        self,
        running: Callable[[], float],
        waiting: Callable[[], float],
        kv_usage: Callable[[], float],
    ) -> None:
        """Make the engine gauges read live engine state at scrape time."""
        if not self.log_stats:
            return
        self.running.labels(**self._labels).set_function(running)
        self.waiting.labels(**self._labels).set_function(waiting)
        self.waiting_by_reason.labels(**self._labels, reason="capacity").set_function(waiting)
        self.kv_usage.labels(**self._labels).set_function(kv_usage)

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
