"""Server-side latency quantiles from the real vLLM's /metrics agree with the client's own.

One load through ``tui.load``'s LoadRunner against the real CPU build of vLLM 0.32. The
server's TTFT histogram, reduced to the load's span (``LatencyTracker`` with no window, fed
a scrape before and after), gives a p50 by PromQL's interpolation; the client measured
every request's TTFT itself. The two must agree within the resolution of the histogram's
bucket that holds the server's p50, plus the client's own overhead.

vLLM stamps a request's arrival after its API server has parsed and tokenized it, and the
client's clock also runs through HTTP, SSE framing and its own event loop: on this 2-core
CPU box the client's TTFT exceeds the server's by 30-130 ms (measured; more on the first
requests after start-up). So the load is one where queueing makes TTFT (a batch of one
sequence, eight clients, 256-token prompts: 0.3-2.5 s) large against that overhead, after
a warm-up load, as an operator's comparison would be.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from realvllm_support import (
    HANG_S,
    SCRAPE_GUARD_S,
    SupervisorFactory,
    good_flags,
    local_client,
    sample_until,
)

from tui.domain.quantiles import LatencyTracker, bucket_around
from tui.domain.results import RunRecord
from tui.domain.telemetry import ServerMetrics
from tui.domain.workload import LoadSpec
from tui.load.runner import LoadRunner
from tui.server.provision import ProvisionedVllm
from tui.telemetry.vllm_metrics import VllmMetricsSource

# The session's event loop: the server may be one an earlier test started and kept
# (test_realvllm_failures.py's fixed max_num_seqs), whose watchers run on that loop.
# timed: the server's TTFT against the client's, alone (tests/suite_tiers.py)
pytestmark = [
    pytest.mark.realvllm,
    pytest.mark.timed,
    pytest.mark.asyncio(loop_scope="session"),
]

CLIENT_OVERHEAD_MS = 150.0
WARM_UP = LoadSpec(input_len=256, output_len=16, num_prompts=4, max_concurrency=2, seed=3)
LOAD = LoadSpec(input_len=256, output_len=16, num_prompts=24, max_concurrency=8, seed=11)


async def _until_counted(source: VllmMetricsSource, requests: int) -> ServerMetrics:
    """Scrape until the TTFT histogram counts ``requests`` (vLLM records a request's
    histograms as it finishes, a moment after the client saw its last token)."""
    return await sample_until(
        source, lambda m: m.histograms["ttft"].count >= requests, f"{requests} TTFTs counted"
    )


async def test_server_ttft_p50_agrees_with_the_client_within_bucket_resolution(
    real_vllm: ProvisionedVllm, supervisors: SupervisorFactory, tmp_path: Path
) -> None:
    # One sequence at a time: a server the failure tests' fix started, or a new one.
    server = await supervisors.ready(good_flags(real_vllm, max_num_seqs=1))
    url = server.base_url
    model = str(real_vllm.model)
    async with local_client(SCRAPE_GUARD_S) as client:
        source = VllmMetricsSource(url + "/metrics", client, timeout_s=SCRAPE_GUARD_S)
        served = (await sample_until(source, lambda m: True, "a first scrape")).histograms
        counted = served["ttft"].count if "ttft" in served else 0
        await asyncio.wait_for(LoadRunner().run(WARM_UP, base_url=url, model=model), HANG_S)
        tracker = LatencyTracker(window_s=None)
        counted += WARM_UP.num_prompts
        before = await _until_counted(source, counted)  # the warm-up stays out
        tracker.observe(before.t, before.histograms)

        result = await asyncio.wait_for(LoadRunner().run(LOAD, base_url=url, model=model), HANG_S)
        assert result.completed == LOAD.num_prompts and result.failed == 0, result.errors

        after = await _until_counted(source, counted + LOAD.num_prompts)
        tracker.observe(after.t, after.histograms)

    latency = tracker.latency()
    assert latency.ttft is not None and latency.ttft.count == LOAD.num_prompts
    assert latency.e2el is not None and latency.e2el.count == LOAD.num_prompts
    server_p50 = latency.ttft.p50
    client_p50 = result.stats["median_ttft_ms"]
    assert server_p50 is not None
    lower, upper = bucket_around(after.histograms["ttft"], server_p50 / 1000)
    resolution_ms = (upper - lower) * 1000
    assert abs(client_p50 - server_p50) <= resolution_ms + CLIENT_OVERHEAD_MS, (
        f"client p50 {client_p50:.1f} ms vs server p50 {server_p50:.1f} ms "
        f"(bucket {lower * 1000:g}-{upper * 1000:g} ms)"
    )
    # The summary a run keeps: the record stores and reads it back as it was.
    record = RunRecord(flags=good_flags(real_vllm), server_latency=latency)
    assert RunRecord.model_validate_json(record.model_dump_json()).server_latency == latency
