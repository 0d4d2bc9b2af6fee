"""vLLM /metrics -> ServerMetrics, checked against the real CPU vLLM 0.32.0 captures.

Expected numbers come from reading the capture files with a plain line grep below, not from
the parser under test.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import httpx
import pytest

from tui.domain.telemetry import SourceStatus
from tui.telemetry.vllm_metrics import (
    NO_VLLM_METRICS,
    VllmMetricsSource,
    parse_vllm_metrics,
    server_metrics,
)

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
NAMES = (
    "metrics_fresh_idle.txt",
    "metrics_after_load.txt",
    "metrics_after_prefix_load.txt",
    "metrics_after_pressure.txt",
)

pytestmark = pytest.mark.skipif(
    not all((CAPTURES / n).is_file() for n in NAMES), reason=f"captures not found in {CAPTURES}"
)


def capture(name: str) -> str:
    return (CAPTURES / name).read_text()


def grep_sum(text: str, name: str) -> float | None:
    """Sum of the values of every line for exactly this sample name; None if there is none."""
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    ]
    return sum(values) if values else None


def grep_label(text: str, name: str, label: str) -> int:
    m = re.search(rf'^{re.escape(name)}\{{[^}}]*[{{,]{label}="(\d+)"', text, re.MULTILINE)
    assert m, f"{label} not in {name}"
    return int(m.group(1))


@pytest.mark.parametrize("name", NAMES)
def test_each_capture(name: str) -> None:
    text = capture(name)
    m = server_metrics(parse_vllm_metrics(text, t=1.0))
    assert m.status is SourceStatus.OK and m.message == ""
    assert m.kv_cache_usage == grep_sum(text, "vllm:kv_cache_usage_perc")
    assert m.num_running == grep_sum(text, "vllm:num_requests_running")
    assert m.num_waiting == grep_sum(text, "vllm:num_requests_waiting")
    assert m.prompt_tokens_total == grep_sum(text, "vllm:prompt_tokens_total")
    assert m.generation_tokens_total == grep_sum(text, "vllm:generation_tokens_total")
    assert m.preemptions_total == grep_sum(text, "vllm:num_preemptions_total")
    assert m.requests_success_total == grep_sum(text, "vllm:request_success_total")
    assert m.extra["prefix_cache_hits_total"] == grep_sum(text, "vllm:prefix_cache_hits_total")
    assert m.extra["prefix_cache_queries_total"] == grep_sum(
        text, "vllm:prefix_cache_queries_total"
    )
    assert m.num_gpu_blocks == grep_label(text, "vllm:cache_config_info", "num_gpu_blocks")
    assert m.block_size == grep_label(text, "vllm:cache_config_info", "block_size")
    # One scrape: no rates yet, and no DCGM gauges on a real vLLM page.
    assert m.prompt_tokens_per_s is None and m.generation_tokens_per_s is None
    assert m.prefix_cache_hit_rate is None
    assert m.gpu is None


def test_pressure_capture_shows_preemptions() -> None:
    text = capture("metrics_after_pressure.txt")
    m = server_metrics(parse_vllm_metrics(text, t=1.0))
    preemptions = grep_sum(text, "vllm:num_preemptions_total")
    assert preemptions and preemptions > 0  # the capture recorded preemptions
    assert m.preemptions_total == preemptions
    assert m.kv_cache_usage == grep_sum(text, "vllm:kv_cache_usage_perc")
    assert m.num_waiting == grep_sum(text, "vllm:num_requests_waiting")
    length = sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total{") and 'finished_reason="length"' in line
    )
    assert m.extra["request_success_total:length"] == length


def rate(after: str, before: str, name: str, dt: float) -> float:
    a, b = grep_sum(after, name), grep_sum(before, name)
    assert a is not None and b is not None
    return (a - b) / dt


def test_rates_fresh_idle_then_after_load() -> None:
    fresh, loaded = capture("metrics_fresh_idle.txt"), capture("metrics_after_load.txt")
    first = parse_vllm_metrics(fresh, t=100.0)
    second = parse_vllm_metrics(loaded, t=110.0)
    m = server_metrics(second, first)
    assert m.prompt_tokens_per_s == pytest.approx(
        rate(loaded, fresh, "vllm:prompt_tokens_total", 10.0)
    )
    assert m.generation_tokens_per_s == pytest.approx(
        rate(loaded, fresh, "vllm:generation_tokens_total", 10.0)
    )
    assert m.prompt_tokens_per_s and m.prompt_tokens_per_s > 0
    d_queries = rate(loaded, fresh, "vllm:prefix_cache_queries_total", 1.0)
    d_hits = rate(loaded, fresh, "vllm:prefix_cache_hits_total", 1.0)
    assert m.prefix_cache_hit_rate == pytest.approx(d_hits / d_queries)


def test_prefix_hit_rate_over_the_interval() -> None:
    # Same server (identical _created stamps): the interval's hits over its queries.
    before, after = capture("metrics_after_load.txt"), capture("metrics_after_prefix_load.txt")
    m = server_metrics(parse_vllm_metrics(after, t=20.0), parse_vllm_metrics(before, t=15.0))
    d_hits = rate(after, before, "vllm:prefix_cache_hits_total", 1.0)
    d_queries = rate(after, before, "vllm:prefix_cache_queries_total", 1.0)
    assert d_hits > 0
    assert m.prefix_cache_hit_rate == pytest.approx(d_hits / d_queries)
    assert m.generation_tokens_per_s == pytest.approx(
        rate(after, before, "vllm:generation_tokens_total", 5.0)
    )


def test_restart_between_scrapes_counts_from_zero() -> None:
    # The pressure capture is from another server process (different _created stamps):
    # its counters restarted at 0, so the increase is the new value itself, even for a
    # counter that happens to be larger than before.
    before, after = capture("metrics_after_prefix_load.txt"), capture("metrics_after_pressure.txt")
    assert grep_sum(before, "vllm:prompt_tokens_created") != grep_sum(
        after, "vllm:prompt_tokens_created"
    )
    m = server_metrics(parse_vllm_metrics(after, t=10.0), parse_vllm_metrics(before, t=8.0))
    generated = grep_sum(after, "vllm:generation_tokens_total")
    assert generated is not None
    assert m.generation_tokens_per_s == pytest.approx(generated / 2.0)


def test_no_queries_in_interval_gives_no_hit_rate() -> None:
    text = capture("metrics_after_load.txt")
    m = server_metrics(parse_vllm_metrics(text, t=2.0), parse_vllm_metrics(text, t=1.0))
    assert m.prompt_tokens_per_s == 0.0
    assert m.prefix_cache_hit_rate is None  # nothing queried: N/A rather than 0 %


def test_old_gpu_prefixed_names() -> None:
    text = capture("metrics_after_pressure.txt")
    old = text.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc").replace(
        "vllm:prefix_cache_", "vllm:gpu_prefix_cache_"
    )
    assert "vllm:kv_cache_usage_perc" not in old and "vllm:prefix_cache_hits" not in old
    first = parse_vllm_metrics(old, t=0.0)
    m = server_metrics(first)
    assert m.kv_cache_usage == grep_sum(text, "vllm:kv_cache_usage_perc")
    assert m.extra["prefix_cache_hits_total"] == grep_sum(text, "vllm:prefix_cache_hits_total")
    # A second scrape with more hits: the hit rate comes from the old names too.
    more = old.replace(
        'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="/models/tiny-llama"} 2944.0',
        'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="/models/tiny-llama"} 3044.0',
    ).replace(
        'vllm:gpu_prefix_cache_queries_total{engine="0",model_name="/models/tiny-llama"} 7110.0',
        'vllm:gpu_prefix_cache_queries_total{engine="0",model_name="/models/tiny-llama"} 7510.0',
    )
    assert more != old
    m2 = server_metrics(parse_vllm_metrics(more, t=1.0), first)
    assert m2.prefix_cache_hit_rate == pytest.approx(100 / 400)


MULTI_ENGINE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:num_requests_waiting{engine="1",model_name="m"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.7
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 50.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1.0
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="1000"} 1.0
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3"} 70000
"""


def test_engines_are_summed_and_kv_usage_averaged() -> None:
    m = server_metrics(parse_vllm_metrics(MULTI_ENGINE, t=0.0))
    assert (m.num_running, m.num_waiting) == (8.0, 3.0)
    assert m.prompt_tokens_total == 150.0
    assert m.kv_cache_usage == pytest.approx(0.6)  # each engine has its own cache
    assert (m.num_gpu_blocks, m.block_size) == (2000, 16)
    assert m.generation_tokens_total is None  # absent: N/A
    assert m.gpu is not None and m.gpu.devices[0].memory_used == 70000 * 1024 * 1024


def test_page_without_vllm_metrics() -> None:
    m = server_metrics(parse_vllm_metrics("# TYPE up gauge\nup 1.0\n", t=0.0))
    assert m.status is SourceStatus.OK
    assert m.message == NO_VLLM_METRICS
    assert m.kv_cache_usage is None and m.num_running is None


class Pages:
    """A MockTransport handler serving the given pages in turn."""

    def __init__(self, *bodies: str) -> None:
        self.bodies = list(bodies)
        self.requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        assert request.url.path == "/metrics"
        return httpx.Response(200, text=self.bodies.pop(0))


async def test_source_keeps_previous_scrape_for_rates() -> None:
    fresh, loaded = capture("metrics_fresh_idle.txt"), capture("metrics_after_load.txt")
    times = iter([50.0, 54.0])
    pages = Pages(fresh, loaded)
    async with httpx.AsyncClient(transport=httpx.MockTransport(pages)) as client:
        source = VllmMetricsSource(
            "http://vllm.test:8000/metrics", client, clock=lambda: next(times)
        )
        first = await source.sample()
        second = await source.sample()
    assert first.status is SourceStatus.OK and first.prompt_tokens_per_s is None
    assert second.t == 54.0
    assert second.prompt_tokens_per_s == pytest.approx(
        rate(loaded, fresh, "vllm:prompt_tokens_total", 4.0)
    )
    assert pages.requests == 2


async def test_source_down_on_connection_refused() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and is now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = VllmMetricsSource(f"http://127.0.0.1:{port}/metrics", timeout_s=5.0)
    try:
        m = await source.sample()
    finally:
        await source.aclose()
    assert m.status is SourceStatus.DOWN
    assert f"127.0.0.1:{port}" in m.message and "cannot connect" in m.message


async def test_source_down_on_timeout_and_bad_page() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(slow)) as client:
        m = await VllmMetricsSource("http://vllm.test/metrics", client, timeout_s=0.5).sample()
    assert m.status is SourceStatus.DOWN and "timed out after 0.5 s" in m.message

    garbage = httpx.MockTransport(lambda r: httpx.Response(200, text="vllm:x{engine=0 nope\n"))
    async with httpx.AsyncClient(transport=garbage) as client:
        m = await VllmMetricsSource("http://vllm.test/metrics", client).sample()
    assert m.status is SourceStatus.DOWN and "malformed metrics page" in m.message

    missing = httpx.MockTransport(lambda r: httpx.Response(404, text="Not Found"))
    async with httpx.AsyncClient(transport=missing) as client:
        m = await VllmMetricsSource("http://vllm.test/metrics", client).sample()
    assert m.status is SourceStatus.DOWN and "HTTP 404" in m.message
