"""The families vLLM 0.32's ``/metrics`` page holds, as data: names, help texts, labels, buckets.

Everything here is read off the captured pages of the real CPU build
(``tests/captures/metrics_*.txt``; a test diffs the simulator's families and label names
against them) and vLLM's ``v1/metrics/loggers.py`` / ``buckets.py`` (reference section 3),
plus prometheus-fastapi-instrumentator's defaults for the ``http_*`` families that vLLM
registers through it (``entrypoints/serve/instrumentator/metrics.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
# prometheus-fastapi-instrumentator's metrics.default() buckets.
HTTP_HIGHR_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    1.5,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5.0,
    7.5,
    10.0,
    30.0,
    60.0,
)
HTTP_LOWR_BUCKETS = (0.1, 0.5, 1.0)
# Handlers vLLM excludes from the HTTP metrics (instrumentator/metrics.py:64-72).
HTTP_EXCLUDED = ("/metrics", "/health", "/load", "/ping", "/version", "/server_info")

FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHED_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
WAITING_REASONS = ("capacity", "deferred")
ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")

Kind = Literal["gauge", "counter", "histogram"]
Buckets = Literal["e2e", "ttft", "itl", "iteration", "n", "preemption", "length"]


@dataclass(frozen=True)
class Family:
    """One ``vllm:`` metric family: its attribute on :class:`SimMetrics` and its shape."""

    attr: str
    kind: Kind
    name: str
    doc: str
    labels: tuple[str, ...] = ()  # beyond model_name and engine
    buckets: Buckets | None = None
    engine_label: bool = True  # admission_rejections has none


# In the order vLLM registers them (the capture's order).
FAMILIES: tuple[Family, ...] = (
    Family(
        "estimated_flops",
        "counter",
        "vllm:estimated_flops_per_gpu",
        "Estimated number of floating point operations per GPU (for Model Flops Utilization "
        "calculations).",
    ),
    Family(
        "estimated_read_bytes",
        "counter",
        "vllm:estimated_read_bytes_per_gpu",
        "Estimated number of bytes read from memory per GPU (for Model Flops Utilization "
        "calculations).",
    ),
    Family(
        "estimated_write_bytes",
        "counter",
        "vllm:estimated_write_bytes_per_gpu",
        "Estimated number of bytes written to memory per GPU (for Model Flops Utilization "
        "calculations).",
    ),
    Family(
        "running",
        "gauge",
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
    ),
    Family(
        "waiting",
        "gauge",
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
    ),
    Family(
        "waiting_by_reason",
        "gauge",
        "vllm:num_requests_waiting_by_reason",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
        "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, "
        "KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
        ("reason",),
    ),
    Family(
        "sleep_state",
        "gauge",
        "vllm:engine_sleep_state",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
        "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        ("sleep_state",),
    ),
    Family(
        "kv_usage",
        "gauge",
        "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.",
    ),
    Family(
        "prefix_queries",
        "counter",
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
    ),
    Family(
        "prefix_hits",
        "counter",
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
    ),
    Family(
        "external_prefix_queries",
        "counter",
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance cache sharing, in "
        "terms of number of queried tokens.",
    ),
    Family(
        "external_prefix_hits",
        "counter",
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache sharing, in terms "
        "of number of cached tokens.",
    ),
    Family(
        "mm_queries",
        "counter",
        "vllm:mm_cache_queries",
        "Multi-modal cache queries, in terms of number of queried items.",
    ),
    Family(
        "mm_hits",
        "counter",
        "vllm:mm_cache_hits",
        "Multi-modal cache hits, in terms of number of cached items.",
    ),
    Family(
        "preemptions",
        "counter",
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
    ),
    Family("prompt_tokens", "counter", "vllm:prompt_tokens", "Number of prefill tokens processed."),
    Family(
        "prompt_by_source",
        "counter",
        "vllm:prompt_tokens_by_source",
        "Number of prompt tokens by source.",
        ("source",),
    ),
    Family(
        "prompt_cached",
        "counter",
        "vllm:prompt_tokens_cached",
        "Number of cached prompt tokens (local + external).",
    ),
    Family(
        "prompt_cached_by_source",
        "counter",
        "vllm:prompt_tokens_cached_by_source",
        "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), "
        "host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
        "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
        "vllm:external_prefix_cache_hits.",
        ("source",),
    ),
    Family(
        "generation_tokens",
        "counter",
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
    ),
    Family(
        "success",
        "counter",
        "vllm:request_success",
        "Count of successfully processed requests.",
        ("finished_reason",),
    ),
    Family(
        "admission_rejections",
        "counter",
        "vllm:admission_rejections",
        "Number of admission attempts rejected by a queue limit, by reason.",
        ("reason",),
        engine_label=False,
    ),
    Family(
        "req_prompt_tokens",
        "histogram",
        "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.",
        buckets="length",
    ),
    Family(
        "req_gen_tokens",
        "histogram",
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        buckets="length",
    ),
    Family(
        "iteration_tokens",
        "histogram",
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        buckets="iteration",
    ),
    Family(
        "max_gen_tokens",
        "histogram",
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        buckets="length",
    ),
    Family(
        "params_n",
        "histogram",
        "vllm:request_params_n",
        "Histogram of the n request parameter.",
        buckets="n",
    ),
    Family(
        "params_max_tokens",
        "histogram",
        "vllm:request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        buckets="length",
    ),
    Family(
        "ttft",
        "histogram",
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        buckets="ttft",
    ),
    Family(
        "itl",
        "histogram",
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        buckets="itl",
    ),
    Family(
        "tpot",
        "histogram",
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        buckets="itl",
    ),
    Family(
        "e2e",
        "histogram",
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        buckets="e2e",
    ),
    Family(
        "queue_time",
        "histogram",
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        buckets="e2e",
    ),
    Family(
        "inference_time",
        "histogram",
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        buckets="e2e",
    ),
    Family(
        "prefill_time",
        "histogram",
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        buckets="e2e",
    ),
    Family(
        "decode_time",
        "histogram",
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        buckets="e2e",
    ),
    Family(
        "req_preemptions",
        "histogram",
        "vllm:request_num_preemptions",
        "Histogram of the number of times a request was preempted.",
        buckets="preemption",
    ),
    Family(
        "prefill_kv_computed",
        "histogram",
        "vllm:request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        buckets="length",
    ),
)

# The children every page shows from the first scrape, at 0 (label name -> values).
CHILDREN: dict[str, tuple[str, tuple[str, ...]]] = {
    "waiting_by_reason": ("reason", WAITING_REASONS),
    "prompt_by_source": ("source", PROMPT_SOURCES),
    "prompt_cached_by_source": ("source", CACHED_SOURCES),
    "success": ("finished_reason", FINISH_REASONS),
    "admission_rejections": ("reason", ADMISSION_REASONS),
}

# vllm:cache_config_info: every CacheConfig field, as the CPU capture lists them, with the
# values a GPU server of 0.32 shows for the fields the simulator does not model.
CACHE_CONFIG_DEFAULTS: dict[str, str] = {
    "_block_size_resolved": "True",
    "block_size": "16",
    "cache_dtype": "auto",
    "cache_hit_alignment_tokens": "None",
    "effective_attention_block_size": "16",
    "enable_mamba_shared_prefix_checkpoint": "False",
    "enable_prefix_caching": "True",
    "hash_block_size": "None",
    "is_attention_free": "False",
    "kv_cache_dtype_skip_layers": "[]",
    "kv_cache_layout": "None",
    "kv_cache_max_concurrency": "None",
    "kv_cache_memory_bytes": "None",
    "kv_cache_size_tokens": "None",
    "kv_offloading_backend": "native",
    "kv_offloading_size": "None",
    "kv_sharing_fast_prefill": "False",
    "mamba_block_size": "None",
    "mamba_cache_dtype": "auto",
    "mamba_cache_mode": "none",
    "mamba_page_size_padded": "None",
    "mamba_ssm_cache_dtype": "float32",
    "num_cpu_blocks": "None",
    "num_gpu_blocks": "None",
    "num_gpu_blocks_override": "None",
    "prefix_cache_retention_interval": "0",
    "prefix_caching_hash_algo": "sha256",
    "prefix_match_unit": "None",
    "replayssm_buffer_len": "16",
    "skip_page_size_padded": "None",
    "sliding_window": "None",
    "swa_bounded_replay": "True",
    "use_kda_recoverssm": "False",
    "use_replayssm": "False",
    "user_specified_block_size": "False",
}


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


def bucket_values(kind: Buckets, max_model_len: int) -> tuple[float, ...] | list[float]:
    """The buckets of one histogram family."""
    table: dict[str, tuple[float, ...]] = {
        "e2e": E2E_BUCKETS,
        "ttft": TTFT_BUCKETS,
        "itl": ITL_BUCKETS,
        "iteration": ITERATION_BUCKETS,
        "n": N_BUCKETS,
        "preemption": PREEMPTION_BUCKETS,
    }
    if kind == "length":
        return buckets_1_2_5(max(1, max_model_len))
    return table[kind]
