"""vLLM's /metrics page reduced to ``ServerMetrics``.

Metric names and meanings: reference section 3 (``v1/metrics/loggers.py`` in vLLM 0.32.0).
New names are read first, then the ``gpu_``-prefixed names older servers export
(``vllm:gpu_cache_usage_perc``, ``vllm:gpu_prefix_cache_{hits,queries}``; deprecated by
vLLM PR #18354). Every series carries an ``engine`` label (data-parallel rank): counters and
queue gauges are summed across engines.

Parsing uses prometheus_client's parser. It strips ``_total`` from counter *family* names but
the *sample* names keep it, so everything here matches on sample names
(``vllm:prompt_tokens_total``), which also covers pages without ``# TYPE`` lines.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from tui.domain.quantiles import DEFAULT_WINDOW_S, LatencyTracker, largest_observed
from tui.domain.telemetry import (
    GpuSample,
    Histogram,
    ServerLatency,
    ServerMetrics,
    SimInfo,
    SourceStatus,
)
from tui.telemetry.dcgm import gpu_from_families
from tui.telemetry.histograms import (
    GENERATION_TOKENS_HISTOGRAM,
    PROMPT_TOKENS_HISTOGRAM,
    latency_histograms,
    read_histogram,
)
from tui.telemetry.scrape import (
    DEFAULT_DEADLINE_S,
    MAX_PAGE_BYTES,
    ScrapeError,
    check_metrics_url,
    parse_families,
    scrape,
)

KV_USAGE_NAMES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
PROMPT_TOKENS = "vllm:prompt_tokens"
GENERATION_TOKENS = "vllm:generation_tokens"
PREEMPTIONS = "vllm:num_preemptions"
REQUEST_SUCCESS = "vllm:request_success"
# (hits, queries) pairs, newest first; a pair is taken whole so hits and queries never mix
# generations of names.
PREFIX_CACHE_PAIRS = (
    ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries"),
    ("vllm:gpu_prefix_cache_hits", "vllm:gpu_prefix_cache_queries"),
)
CACHE_CONFIG_INFO = "vllm:cache_config_info"
SIM_INFO = "vtc_sim_info"  # vtc's simulator only (tui/sim/metrics.py): what it simulates

NO_VLLM_METRICS = (
    "no vllm: metrics on this page (a server started with --disable-log-stats exports none)"
)


@dataclass(frozen=True)
class Counter:
    """A counter summed across label sets, with the ``_created`` stamps that date its start.

    A change of ``created`` means the counter restarted (the server restarted) even when
    the new value happens to be larger than the old one.
    """

    value: float
    created: tuple[float, ...] = ()


@dataclass(frozen=True)
class VllmScrape:
    """The raw totals of one /metrics page, before rates are computed against a previous one."""

    t: float
    has_vllm_metrics: bool
    kv_cache_usage: float | None = None
    num_running: float | None = None
    num_waiting: float | None = None
    prompt_tokens: Counter | None = None
    generation_tokens: Counter | None = None
    prefix_hits: Counter | None = None
    prefix_queries: Counter | None = None
    preemptions: Counter | None = None
    request_success: Counter | None = None
    request_success_by_reason: Mapping[str, float] = field(default_factory=dict)
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    gpu: GpuSample | None = None
    histograms: Mapping[str, Histogram] = field(default_factory=dict)
    largest_request_tokens: float | None = None
    cache: CacheConfigInfo | None = None
    sim: SimInfo | None = None


@dataclass(frozen=True)
class CacheConfigInfo:
    """What ``vllm:cache_config_info``'s labels say (``None``: absent or "None")."""

    num_gpu_blocks: int | None = None  # summed over engines
    block_size: int | None = None
    enable_prefix_caching: bool | None = None
    gpu_memory_utilization: float | None = None


class _Index:
    """Samples of a page grouped by sample name."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.by_name: dict[str, list[Sample]] = defaultdict(list)
        for family in families:
            for s in family.samples:
                if isinstance(s.value, (int, float)) and math.isfinite(s.value):
                    self.by_name[s.name].append(s)

    def has(self, name: str) -> bool:
        return name in self.by_name

    def gauge_sum(self, name: str) -> float | None:
        samples = self.by_name.get(name)
        return None if not samples else float(sum(s.value for s in samples))

    def gauge_mean(self, name: str) -> float | None:
        samples = self.by_name.get(name)
        return None if not samples else float(sum(s.value for s in samples) / len(samples))

    def counter(self, base: str) -> Counter | None:
        samples = self.by_name.get(base + "_total")
        if not samples:
            return None
        created = sorted(s.value for s in self.by_name.get(base + "_created", ()))
        return Counter(float(sum(s.value for s in samples)), tuple(created))


def scrape_from_families(
    families: Iterable[Metric], t: float, gpu_source: str = "dcgm"
) -> VllmScrape:
    """Reduce parsed families to a ``VllmScrape`` (pure; no I/O)."""
    families = list(families)
    index = _Index(families)
    gpu = gpu_from_families(families, t, gpu_source)
    if not any(name.startswith("vllm:") for name in index.by_name):
        return VllmScrape(t=t, has_vllm_metrics=False, gpu=gpu)

    kv_usage = None
    for name in KV_USAGE_NAMES:
        if index.has(name):
            # A fraction per engine (each DP rank has its own cache): the mean, not the sum.
            kv_usage = index.gauge_mean(name)
            break

    hits = queries = None
    for hits_name, queries_name in PREFIX_CACHE_PAIRS:
        if index.has(queries_name + "_total"):
            hits, queries = index.counter(hits_name), index.counter(queries_name)
            break

    by_reason: dict[str, float] = defaultdict(float)
    for s in index.by_name.get(REQUEST_SUCCESS + "_total", ()):
        by_reason[s.labels.get("finished_reason", "")] += float(s.value)

    cache = _cache_config(index.by_name.get(CACHE_CONFIG_INFO, []))
    return VllmScrape(
        t=t,
        has_vllm_metrics=True,
        kv_cache_usage=kv_usage,
        num_running=index.gauge_sum(RUNNING),
        num_waiting=index.gauge_sum(WAITING),
        prompt_tokens=index.counter(PROMPT_TOKENS),
        generation_tokens=index.counter(GENERATION_TOKENS),
        prefix_hits=hits,
        prefix_queries=queries,
        preemptions=index.counter(PREEMPTIONS),
        request_success=index.counter(REQUEST_SUCCESS),
        request_success_by_reason=dict(by_reason),
        num_gpu_blocks=cache.num_gpu_blocks,
        block_size=cache.block_size,
        gpu=gpu,
        histograms=latency_histograms(index.by_name),
        largest_request_tokens=_largest_request(index.by_name),
        cache=cache,
        sim=_sim_info(index.by_name.get(SIM_INFO, [])),
    )


def _sim_info(samples: list[Sample]) -> SimInfo | None:
    """``vtc_sim_info``'s labels: the simulated GPU and the time scale (``None``: absent)."""
    if not samples:
        return None
    labels = samples[0].labels
    return SimInfo(gpu_name=labels.get("gpu_name", ""), speed=_float_label(labels.get("speed")))


def _largest_request(by_name: Mapping[str, list[Sample]]) -> float | None:
    """An upper bound on the longest request served (prompt + output tokens), from the
    request size histograms' highest non-empty buckets; ``None`` before any request."""
    prompt = largest_observed(read_histogram(by_name, PROMPT_TOKENS_HISTOGRAM))
    output = largest_observed(read_histogram(by_name, GENERATION_TOKENS_HISTOGRAM))
    if prompt is None or output is None:
        return None
    return prompt + output


def _cache_config(samples: list[Sample]) -> CacheConfigInfo:
    """``vllm:cache_config_info``'s labels; num_gpu_blocks summed over engines.

    Labels hold ``str()`` of CacheConfig fields, so "None" before the profiler has run.
    """
    blocks = [b for s in samples if (b := _int_label(s.labels.get("num_gpu_blocks"))) is not None]
    sizes = [b for s in samples if (b := _int_label(s.labels.get("block_size"))) is not None]
    first = samples[0].labels if samples else {}
    caching = {"True": True, "False": False}.get(first.get("enable_prefix_caching", ""))
    return CacheConfigInfo(
        num_gpu_blocks=sum(blocks) if blocks else None,
        block_size=sizes[0] if sizes else None,
        enable_prefix_caching=caching,
        gpu_memory_utilization=_float_label(first.get("gpu_memory_utilization")),
    )


def _float_label(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _int_label(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def parse_vllm_metrics(text: str, t: float, gpu_source: str = "dcgm") -> VllmScrape:
    """Parse a /metrics page. Raises ``ScrapeError`` if the text is not a Prometheus page."""
    return scrape_from_families(parse_families(text), t, gpu_source)


def _increase(current: Counter | None, previous: Counter | None) -> float | None:
    """How much a counter grew between two scrapes, Prometheus-style across restarts.

    A restart (``_created`` changed, or the value went down) means the counter began again
    at zero, so the increase is the current value.
    """
    if current is None or previous is None:
        return None
    stamps_differ = bool(current.created and previous.created) and (
        current.created != previous.created
    )
    restarted = stamps_differ or current.value < previous.value
    return current.value if restarted else current.value - previous.value


def _value(counter: Counter | None) -> float | None:
    return None if counter is None else counter.value


def server_metrics(
    current: VllmScrape,
    previous: VllmScrape | None = None,
    latency: ServerLatency | None = None,
) -> ServerMetrics:
    """``ServerMetrics`` for ``current``; rates and the prefix hit rate need ``previous``.

    ``latency``: the window of quantiles the caller keeps over the scrapes (a
    ``LatencyTracker``), passed through.
    """
    if not current.has_vllm_metrics:
        return ServerMetrics(
            t=current.t, status=SourceStatus.OK, message=NO_VLLM_METRICS, gpu=current.gpu
        )
    prompt_rate = gen_rate = hit_rate = None
    if previous is not None and previous.has_vllm_metrics and current.t > previous.t:
        dt = current.t - previous.t
        d_prompt = _increase(current.prompt_tokens, previous.prompt_tokens)
        d_gen = _increase(current.generation_tokens, previous.generation_tokens)
        prompt_rate = None if d_prompt is None else d_prompt / dt
        gen_rate = None if d_gen is None else d_gen / dt
        d_hits = _increase(current.prefix_hits, previous.prefix_hits)
        d_queries = _increase(current.prefix_queries, previous.prefix_queries)
        # No queries in the interval: no rate to report (not 0 %, which would read as a miss).
        if d_hits is not None and d_queries:
            hit_rate = d_hits / d_queries

    extra: dict[str, float] = {}
    if current.prefix_hits is not None and current.prefix_queries is not None:
        extra["prefix_cache_hits_total"] = current.prefix_hits.value
        extra["prefix_cache_queries_total"] = current.prefix_queries.value
    for reason, count in sorted(current.request_success_by_reason.items()):
        extra[f"request_success_total:{reason}"] = count

    return ServerMetrics(
        t=current.t,
        status=SourceStatus.OK,
        kv_cache_usage=current.kv_cache_usage,
        num_running=current.num_running,
        num_waiting=current.num_waiting,
        prompt_tokens_total=_value(current.prompt_tokens),
        generation_tokens_total=_value(current.generation_tokens),
        prompt_tokens_per_s=prompt_rate,
        generation_tokens_per_s=gen_rate,
        prefix_cache_hit_rate=hit_rate,
        preemptions_total=_value(current.preemptions),
        requests_success_total=_value(current.request_success),
        num_gpu_blocks=current.num_gpu_blocks,
        block_size=current.block_size,
        gpu=current.gpu,
        extra=extra,
        histograms=current.histograms,
        latency=latency,
        prefix_caching=current.cache.enable_prefix_caching if current.cache else None,
        gpu_memory_utilization=current.cache.gpu_memory_utilization if current.cache else None,
        largest_request_tokens=current.largest_request_tokens,
        sim=current.sim,
    )


class VllmMetricsSource:
    """Scrapes a vLLM server's /metrics URL; keeps the previous good scrape for rates.

    ``client`` is injected (tests use ``httpx.MockTransport``); when omitted an
    ``httpx.AsyncClient`` is created on first use and closed by ``aclose()``. ``clock`` gives
    the sample times (monotonic seconds) the rates divide by. ``deadline_s`` bounds each
    whole scrape and ``max_bytes`` its page (``tui.telemetry.scrape``); parsing runs in a
    worker thread. ``window_s``: the sliding window of the latency quantiles.
    """

    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient | None = None,
        *,
        timeout_s: float = DEFAULT_DEADLINE_S,
        max_bytes: int = MAX_PAGE_BYTES,
        window_s: float = DEFAULT_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = check_metrics_url(url)
        self._client = client
        self._owns_client = client is None
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._clock = clock
        self._previous: VllmScrape | None = None
        self._latency = LatencyTracker(window_s)

    async def sample(self) -> ServerMetrics:
        """Scrape once. Never raises: failures give status DOWN with the reason."""
        if self._client is None:
            self._client = httpx.AsyncClient()
        gpu_source = f"dcgm:{self.url}"
        try:
            current = await scrape(
                self._client,
                self.url,
                lambda families, t: scrape_from_families(families, t, gpu_source),
                deadline_s=self._timeout_s,
                max_bytes=self._max_bytes,
                clock=self._clock,
            )
        except ScrapeError as exc:
            return ServerMetrics(t=self._clock(), status=SourceStatus.DOWN, message=str(exc))
        latency = None
        if current.has_vllm_metrics:
            self._latency.observe(current.t, current.histograms)
            latency = self._latency.latency(current.t)
        metrics = server_metrics(current, self._previous, latency)
        if current.has_vllm_metrics:
            # A DOWN spell keeps the last good scrape: the next rate spans the gap, and a
            # restart in between is recognised by the counters' _created stamps.
            self._previous = current
        return metrics

    def reset(self) -> None:
        """Forget the previous scrape (e.g. the console started a different server)."""
        self._previous = None
        self._latency.reset()

    async def aclose(self) -> None:
        """Close the HTTP client if this source created it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
