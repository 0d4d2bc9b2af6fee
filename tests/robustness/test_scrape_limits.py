"""Scrapes against real sockets that misbehave: every one ends, bounded, with one short line.

Issue 8 (scrapes): a /metrics endpoint that sent its headers and then one byte a second was
never called down (the timeout was per read), and a 50 MB page blocked the UI and made a
52-million-character message. Each test here is one such endpoint, served for real on a
loopback socket by ``fakes.metrics_server``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from fakes.metrics_server import serving

from tui.domain.telemetry import ServerMetrics, SourceStatus
from tui.telemetry.dcgm import DcgmGpuSource
from tui.telemetry.scrape import MAX_PAGE_BYTES, MAX_REASON_CHARS, ScrapeError, scrape
from tui.telemetry.vllm_metrics import VllmMetricsSource

CAPTURE = Path(__file__).resolve().parent.parent / "captures" / "metrics_after_load.txt"
DEADLINE_S = 1.5
# The invariant is "ends at its deadline, not never"; the slack only absorbs a busy machine.
SLACK_S = 20.0


def _short_line(message: str) -> None:
    assert message and "\n" not in message and len(message) <= MAX_REASON_CHARS, message


async def _sample(url: str) -> tuple[ServerMetrics, float]:
    async with httpx.AsyncClient(trust_env=False) as client:
        source = VllmMetricsSource(url, client, timeout_s=DEADLINE_S)
        started = time.monotonic()
        sample = await source.sample()
        return sample, time.monotonic() - started


async def test_trickling_page_is_down_at_the_deadline() -> None:
    with serving("trickle", interval_s=0.2) as server:
        sample, elapsed = await _sample(server.url)
    assert sample.status is SourceStatus.DOWN
    assert "timed out after 1.5 s" in sample.message
    _short_line(sample.message)
    # Per-read timeouts never fire here (a byte every 0.2 s): only a whole-request deadline
    # ends this scrape at all.
    assert elapsed < DEADLINE_S + SLACK_S


async def test_silent_server_is_down_at_the_deadline() -> None:
    with serving("silent") as server:
        sample, elapsed = await _sample(server.url)
    assert sample.status is SourceStatus.DOWN
    _short_line(sample.message)
    assert elapsed < DEADLINE_S + SLACK_S


async def test_huge_page_is_cut_at_the_cap_with_a_short_message() -> None:
    with serving("huge", huge_bytes=50 * 1024 * 1024) as server:
        async with httpx.AsyncClient(trust_env=False) as client:
            source = VllmMetricsSource(server.url, client, timeout_s=30.0)
            sample = await source.sample()
    assert sample.status is SourceStatus.DOWN
    assert "over the 4 MiB limit" in sample.message
    _short_line(sample.message)


async def test_declared_huge_page_is_refused_before_reading() -> None:
    with serving("huge_declared", huge_bytes=50 * 1024 * 1024) as server:
        sample, _ = await _sample(server.url)
    assert sample.status is SourceStatus.DOWN
    assert "50.0 MiB, over the 4 MiB limit" in sample.message


async def test_garbage_page_is_down_with_a_short_reason() -> None:
    with serving("garbage") as server:
        sample, _ = await _sample(server.url)
    assert sample.status is SourceStatus.DOWN
    assert sample.message.startswith("malformed metrics page")
    _short_line(sample.message)


async def test_error_status_with_a_big_body_is_one_line() -> None:
    with serving("status", status=500) as server:
        sample, _ = await _sample(server.url)
    assert sample.status is SourceStatus.DOWN
    assert sample.message == f"HTTP 500 from {server.url}"


async def test_nothing_listening_is_down() -> None:
    with serving("page") as server:
        url = server.url
    sample, _ = await _sample(url)  # the server is gone: connection refused
    assert sample.status is SourceStatus.DOWN
    _short_line(sample.message)


async def test_a_good_page_after_a_bad_one_is_read() -> None:
    with serving("garbage") as server:
        async with httpx.AsyncClient(trust_env=False) as client:
            source = VllmMetricsSource(server.url, client, timeout_s=DEADLINE_S)
            assert (await source.sample()).status is SourceStatus.DOWN
            server.behaviour, server.body = "page", CAPTURE.read_bytes()
            good = await source.sample()
    assert good.status is SourceStatus.OK and good.kv_cache_usage is not None


async def test_parsing_runs_off_the_event_loop_thread() -> None:
    seen: list[threading.Thread] = []

    def reduce(families: list[object], t: float) -> int:
        seen.append(threading.current_thread())
        return len(families)

    with serving("page", body=CAPTURE.read_bytes()) as server:
        async with httpx.AsyncClient(trust_env=False) as client:
            count = await scrape(client, server.url, reduce, deadline_s=DEADLINE_S)
    assert count > 30
    assert seen and seen[0] is not threading.current_thread()


async def test_a_page_just_under_the_cap_is_read() -> None:
    line = b'vllm:num_requests_running{engine="0",model_name="m"} 1.0\n'
    lines = (MAX_PAGE_BYTES - 100) // len(line)
    body = b"# TYPE vllm:num_requests_running gauge\n" + line * lines
    with serving("page", body=body) as server:
        async with httpx.AsyncClient(trust_env=False) as client:
            source = VllmMetricsSource(server.url, client, timeout_s=60.0)
            sample = await source.sample()
    assert sample.status is SourceStatus.OK
    assert sample.num_running == lines  # one series repeated: summed


async def test_dcgm_source_is_bounded_too() -> None:
    with serving("trickle", interval_s=0.2) as server:
        async with httpx.AsyncClient(trust_env=False) as client:
            gpu = await DcgmGpuSource(server.url, client, timeout_s=DEADLINE_S).sample()
    assert gpu.status is SourceStatus.DOWN
    _short_line(gpu.message)


def test_scrape_error_messages_are_cut_to_one_line() -> None:
    error = ScrapeError("x" * 52_000_000 + "\nsecond line")
    _short_line(str(error))
    assert str(error).endswith("…")


@pytest.mark.parametrize("url", ["ftp://host/metrics", "localhost:8000", "x" * 10_000])
def test_bad_urls_are_refused_in_one_line(url: str) -> None:
    with pytest.raises(ValueError) as info:
        VllmMetricsSource(url)
    assert len(str(info.value)) < 400
