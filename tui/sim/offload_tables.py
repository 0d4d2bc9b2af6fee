"""The families ``--kv-offloading-size`` adds to ``/metrics``, as vLLM 0.32 and 0.33 register them.

Read by running each version's own code (issue 19): ``EngineArgs(...).create_engine_config()``
for a local model, then ``PrometheusStatLogger(config, [0])`` and the registry read back, in
the CPU build of 0.32.0 and in 0.33.0's parser env (its wheel over that build). A plain server
registers the same 38 ``vllm:`` families in both (``v1/metrics/loggers.py`` is byte for byte
the same file in the two wheels), plus ``vllm:cache_config_info``; 0.33's source names 140
``vllm:`` families against 0.32's 128, and the 12 it adds are all registered by KV connectors
only (``kv_offload_config_info``, ``kv_offload_tiering_promotion_latency_seconds``,
``mooncake_*``, ``umbp_transfer_*``).

``--kv-offloading-size`` (native backend) makes the config's ``kv_transfer_config`` the
``OffloadingConnector`` as ``kv_both`` (``config/vllm.py:1105-1132`` in 0.32), so:

- ``PrometheusStatLogger`` registers ``vllm:num_requests_kv_fetch_by_stage`` for a KV consumer
  (``v1/metrics/loggers.py:571-590``, the same in both), its three stages at 0;
- the connector's ``OffloadPromMetrics`` (``kv_connector/v1/offloading/metrics.py``: 0.33
  ``:371``; connector definitions ``:80``, deprecated ``transfer_type`` ones ``:157``, built
  with their two directions at 0) registers the CPU spec's families
  (``v1/kv_offload/cpu/spec.py:51``, names in ``cpu/common.py``) and the transfer ones, whose
  series appear only once observed (so the page holds their HELP and TYPE alone);
- 0.33 adds ``vllm:kv_offload_config_info`` labelled by ``CPUOffloadingInfo``
  (``v1/kv_offload/cpu/common.py:34-56``), a series from the engine's first scheduler step
  (``offloading/metrics.py:550-575``).

17 families in 0.32, 18 in 0.33. ``VLLM_USE_SIMPLE_KV_OFFLOAD`` (another connector, other
families) is not simulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from tui.domain.vllm_release import release_of


@dataclass(frozen=True)
class OffloadFamily:
    """One family: its name (counters without ``_total``), kind, help, labels beyond
    ``model_name`` and ``engine``, histogram buckets, and the series it has from the start."""

    name: str
    kind: Literal["gauge", "counter", "histogram"]
    doc: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None
    children: tuple[tuple[str, ...], ...] = ()


SIZE_BUCKETS: Final = (1e6, 5e6, 1e7, 2e7, 4e7, 6e7, 8e7, 1e8, 1.5e8, 2e8)
"""The byte-size buckets of the offload load, store and transfer-size histograms."""

OFFLOAD_FAMILIES: Final[tuple[OffloadFamily, ...]] = (
    OffloadFamily(
        "vllm:kv_offload_total_bytes",
        "counter",
        "Number of bytes offloaded by KV connector",
        labels=("transfer_type",),
        children=(("CPU_to_GPU",), ("GPU_to_CPU",)),
    ),
    OffloadFamily(
        "vllm:kv_offload_total_time",
        "counter",
        "Total time measured by all KV offloading operations",
        labels=("transfer_type",),
        children=(("CPU_to_GPU",), ("GPU_to_CPU",)),
    ),
    OffloadFamily(
        "vllm:kv_offload_size",
        "histogram",
        "Histogram of KV offload transfer size, in bytes.",
        labels=("transfer_type",),
        buckets=SIZE_BUCKETS,
        children=(("CPU_to_GPU",), ("GPU_to_CPU",)),
    ),
    OffloadFamily(
        "vllm:kv_offload_cpu_cache_usage_perc",
        "gauge",
        (
            "Fraction of CPU KV-cache space currently pinned by active transfers (0.0 = idle, 1.0"
            " = saturated). Sustained high values indicate transfers (stores or promotions) may "
            "be dropped due to insufficient capacity."
        ),
    ),
    OffloadFamily(
        "vllm:kv_offload_cpu_cache_write_usage_perc",
        "gauge",
        (
            "Fraction of CPU KV-cache space currently pinned by in-flight stores that have not "
            "yet completed (0.0 = idle, 1.0 = saturated)."
        ),
    ),
    OffloadFamily(
        "vllm:kv_offload_cpu_cache_read_usage_perc",
        "gauge",
        (
            "Fraction of CPU KV-cache space currently pinned by in-flight loads that have not yet"
            " completed (0.0 = idle, 1.0 = saturated)."
        ),
    ),
    OffloadFamily(
        "vllm:kv_offload_cpu_allocation_size",
        "histogram",
        "Histogram of the number of CPU chunks requested by each KV offload prepare_store call.",
        buckets=(1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0),
    ),
    OffloadFamily(
        "vllm:kv_offload_load_bytes",
        "counter",
        "Total bytes loaded from offload storage to GPU.",
    ),
    OffloadFamily(
        "vllm:kv_offload_load_time",
        "counter",
        "Total load time from offload storage to GPU, in seconds.",
    ),
    OffloadFamily(
        "vllm:kv_offload_load_size",
        "histogram",
        "Histogram of KV offload load operation size, in bytes.",
        buckets=SIZE_BUCKETS,
    ),
    OffloadFamily(
        "vllm:kv_offload_store_bytes",
        "counter",
        "Total bytes stored from GPU to offload storage.",
    ),
    OffloadFamily(
        "vllm:kv_offload_store_time",
        "counter",
        "Total store time from GPU to offload storage, in seconds.",
    ),
    OffloadFamily(
        "vllm:kv_offload_store_size",
        "histogram",
        "Histogram of KV offload store operation size, in bytes.",
        buckets=SIZE_BUCKETS,
    ),
    OffloadFamily(
        "vllm:kv_offload_lookup_sync_delay_seconds",
        "histogram",
        "Histogram of the time spent in a single offload lookup call, in seconds.",
        buckets=(1e-05, 5e-05, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0),
    ),
    OffloadFamily(
        "vllm:kv_offload_lookup_async_delay_seconds",
        "histogram",
        (
            "Histogram of time between a request's offload lookup first deferring and the "
            "following lookup resolving, or request finish, in seconds."
        ),
        buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0),
    ),
    OffloadFamily(
        "vllm:kv_offload_allocation_failure",
        "counter",
        "Number of KV offload store allocation attempts that failed.",
    ),
    OffloadFamily(
        "vllm:num_requests_kv_fetch_by_stage",
        "gauge",
        (
            "Number of waiting requests by async KV load stage. Stage labels: 'waiting_to_start' "
            "= needs an async KV load that has not started; 'in_progress' = load started and not "
            "yet reported finished; 'completed_waiting' = load finished, request not running yet."
        ),
        labels=("stage",),
        children=(("waiting_to_start",), ("in_progress",), ("completed_waiting",)),
    ),
)
CONFIG_INFO: Final = "vllm:kv_offload_config_info"
CONFIG_INFO_DOC: Final = (
    "Static configuration of the KV offload managers of this engine instance. The configured "
    "offloading spec declares the label names, and each manager fills the values, so a series"
    " appears from the first scheduler step of its engine. A manager reports one series for "
    "each configuration it holds, and a label of its own tells the series apart. Each engine "
    "reports its own configuration, not the instance total."
)
CONFIG_INFO_LABELS: Final = (
    "cpu_num_chunks",
    "cpu_blocks_per_chunk",
    "cpu_kv_cache_size_bytes",
    "cpu_kv_cache_size_tokens",
)


def offload_families(version: str) -> tuple[OffloadFamily, ...]:
    """The families ``--kv-offloading-size`` registers on ``version``, in the page's order."""
    if not release_of(version).offload_config_info:
        return OFFLOAD_FAMILIES
    info = OffloadFamily(CONFIG_INFO, "gauge", CONFIG_INFO_DOC, labels=CONFIG_INFO_LABELS)
    # 0.33 registers it last of the connector's, before the scheduler's fetch stages
    return (*OFFLOAD_FAMILIES[:-1], info, OFFLOAD_FAMILIES[-1])
