"""The load runner end to end against the fake vLLM: counts, progress, cancel, no leaks."""

from __future__ import annotations

import asyncio
import itertools
import math

import pytest
from fakes.load import FakeVllm

from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.client import PreparedRequest, TransportKind
from tui.load.prompts import PromptRequest
from tui.load.runner import CANCELLED_ERROR, LoadRunner
from tui.load.wire import BodyEnd, BodyFeed, Response

TRANSPORTS: list[TransportKind] = ["native", "aiohttp"]


async def until(fake: FakeVllm, predicate: object) -> None:
    """Wait (woken by the fake's own notifications) until ``predicate()`` holds."""
    assert await asyncio.to_thread(fake.wait_until, predicate)  # type: ignore[arg-type]


def spec(**changes: object) -> LoadSpec:
    base: dict[str, object] = {
        "input_len": 16,
        "output_len": 5,
        "num_prompts": 8,
        "max_concurrency": 4,
    }
    base.update(changes)
    return LoadSpec(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_run_completes_every_request(fake_vllm: FakeVllm, kind: TransportKind) -> None:
    fake_vllm.chunk_delay_s = 0.005
    before = asyncio.all_tasks()
    result = await LoadRunner(transport=kind).run(spec(), base_url=fake_vllm.base_url, model="fake")
    assert asyncio.all_tasks() == before
    assert (result.completed, result.failed) == (8, 0)
    # 16 requested input tokens − 1 BOS = 15 words; the fake reports words + 1 = 16.
    assert result.total_input_tokens == 8 * 16
    assert result.total_output_tokens == 8 * 5
    assert result.duration > 0
    assert result.request_throughput == pytest.approx(8 / result.duration)
    assert result.output_throughput == pytest.approx(40 / result.duration)
    assert result.total_token_throughput == pytest.approx((128 + 40) / result.duration)
    assert result.max_concurrency == 4 and result.request_rate == "inf"
    assert "p99_ttft_ms" in result.stats and result.stats["mean_itl_ms"] > 0
    assert result.errors == []
    assert result.cancelled is False and result.not_sent == 0
    assert result.rtfx == 0.0 and result.num_prompts == 8
    assert fake_vllm.max_open_streams <= 4  # the semaphore caps in-flight requests
    assert all(body["ignore_eos"] is True for body in fake_vllm.bodies)


async def test_failures_are_counted_and_excluded(fake_vllm: FakeVllm) -> None:
    fake_vllm.fail_every = 3  # request indices 0, 3, 6 get HTTP 500
    result = await LoadRunner().run(spec(), base_url=fake_vllm.base_url, model="fake")
    assert (result.completed, result.failed) == (5, 3)
    assert result.total_output_tokens == 5 * 5
    assert result.total_input_tokens == 5 * 16
    assert len(result.errors) == 3 and all("HTTP 500" in e for e in result.errors)


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_streams_the_server_aborted_are_counted_beside_bench_serves_success(
    fake_vllm: FakeVllm, kind: TransportKind
) -> None:
    # vLLM ends open streams with finish_reason "abort" when it shuts down. bench serve
    # counts those as successes (ref 4.1), so do we, but the result says how many there were.
    fake_vllm.last_finish_reason = "abort"
    result = await LoadRunner(transport=kind).run(spec(), base_url=fake_vllm.base_url, model="fake")
    assert (result.completed, result.failed) == (8, 0)
    assert result.aborted_by_server == 8

    fake_vllm.last_finish_reason = "length"  # a normal end is not an abort
    result = await LoadRunner(transport=kind).run(spec(), base_url=fake_vllm.base_url, model="fake")
    assert result.aborted_by_server == 0


async def test_rate_limited_run_and_goodput(fake_vllm: FakeVllm) -> None:
    runner = LoadRunner(goodput={"e2el": 60_000}, percentiles=[99.9])
    result = await runner.run(
        spec(num_prompts=4, request_rate=40.0, burstiness=math.inf, max_concurrency=None),
        base_url=fake_vllm.base_url,
        model="fake",
    )
    # The last request is sent at 4/40 = 0.1 s, so the run cannot be shorter.
    assert result.duration >= 0.1
    assert result.completed == 4
    assert result.request_goodput == pytest.approx(4 / result.duration)  # all within 60 s
    assert "p99.9_e2el_ms" in result.stats
    assert result.request_rate == 40.0


async def test_progress_is_reported(fake_vllm: FakeVllm) -> None:
    fake_vllm.chunk_delay_s = 0.01
    seen: list[LoadProgress] = []
    runner = LoadRunner(progress_interval_s=0.05, lag_tick_s=0.01)
    await runner.run(
        spec(output_len=20, max_concurrency=2),
        base_url=fake_vllm.base_url,
        model="fake",
        on_progress=seen.append,
    )
    assert len(seen) >= 2
    assert all(p.total == 8 and 0 <= p.in_flight <= 2 for p in seen)
    assert all(p.done >= q.done for q, p in itertools.pairwise(seen))
    final = seen[-1]
    assert (final.done, final.failed, final.in_flight) == (8, 0, 0)
    assert final.ttft_p50_ms is not None and final.itl_p99_ms is not None
    ticks = [p for p in seen[:-1] if p.loop_lag_ms is not None]
    assert ticks and all(p.loop_lag_ms >= 0 for p in ticks)  # type: ignore[operator]
    assert any(p.output_tokens_per_s > 0 for p in seen)


async def test_progress_callback_errors_do_not_stop_the_run(fake_vllm: FakeVllm) -> None:
    def broken(_: LoadProgress) -> None:
        raise RuntimeError("ui went away")

    result = await LoadRunner(progress_interval_s=0.01).run(
        spec(num_prompts=2), base_url=fake_vllm.base_url, model="fake", on_progress=broken
    )
    assert result.completed == 2


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_cancel_returns_partial_results_and_closes_streams(
    fake_vllm: FakeVllm, kind: TransportKind
) -> None:
    fake_vllm.chunk_delay_s = 0.05  # 200 chunks: each request would take ~10 s
    before = asyncio.all_tasks()
    runner = LoadRunner(transport=kind)
    run = asyncio.create_task(
        runner.run(spec(num_prompts=10, output_len=200), base_url=fake_vllm.base_url, model="fake")
    )
    await until(fake_vllm, lambda: fake_vllm.open_streams == 4)
    assert runner.running

    partial = await runner.cancel()
    assert partial is not None
    assert (partial.completed, partial.failed) == (0, 4)
    assert partial.errors == [CANCELLED_ERROR] * 4
    assert partial.cancelled is True and partial.not_sent == 6
    assert await run == partial
    assert asyncio.all_tasks() == before
    assert not runner.running
    # The server sees every stream go away (its next write fails).
    await until(fake_vllm, lambda: fake_vllm.open_streams == 0)
    assert fake_vllm.disconnects == 4
    assert fake_vllm.finished_streams == 0


async def test_cancelling_the_run_task_leaves_nothing_behind(fake_vllm: FakeVllm) -> None:
    fake_vllm.chunk_delay_s = 0.05
    before = asyncio.all_tasks()
    runner = LoadRunner()
    run = asyncio.create_task(
        runner.run(spec(output_len=200), base_url=fake_vllm.base_url, model="fake")
    )
    await until(fake_vllm, lambda: fake_vllm.open_streams == 4)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert asyncio.all_tasks() == before
    await until(fake_vllm, lambda: fake_vllm.open_streams == 0)


async def test_request_timeout_fails_requests(fake_vllm: FakeVllm) -> None:
    fake_vllm.first_delay_s = 2.0
    result = await LoadRunner().run(
        spec(num_prompts=2, request_timeout_s=0.2), base_url=fake_vllm.base_url, model="fake"
    )
    assert (result.completed, result.failed) == (0, 2)
    assert all("timed out" in e for e in result.errors)


async def test_cancel_without_a_run_and_double_run(fake_vllm: FakeVllm) -> None:
    runner = LoadRunner()
    assert await runner.cancel() is None
    fake_vllm.chunk_delay_s = 0.02
    first = asyncio.create_task(
        runner.run(spec(num_prompts=2, output_len=50), base_url=fake_vllm.base_url, model="f")
    )
    await until(fake_vllm, lambda: fake_vllm.open_streams == 2)
    with pytest.raises(RuntimeError, match="already in progress"):
        await runner.run(spec(), base_url=fake_vllm.base_url, model="f")
    await runner.cancel()
    await first


async def test_bad_base_url_is_refused_before_connecting() -> None:
    before = asyncio.all_tasks()
    runner = LoadRunner(transport="aiohttp")
    with pytest.raises(ValueError, match="http"):
        await runner.run(spec(), base_url="localhost:8000", model="m")
    assert asyncio.all_tasks() == before and not runner.running


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError):
        LoadRunner(goodput={"itl": 1})
    with pytest.raises(ValueError):
        LoadRunner(percentiles=[120])
    with pytest.raises(ValueError):
        LoadRunner(progress_interval_s=0)


async def test_warmups_go_first_and_are_not_measured(fake_vllm: FakeVllm) -> None:
    runner = LoadRunner()
    result = await runner.run(
        spec(num_prompts=3, max_concurrency=2, num_warmups=4),
        base_url=fake_vllm.base_url,
        model="fake",
    )
    assert result.completed == 3 and result.failed == 0
    assert len(fake_vllm.bodies) == 3 + 4
    # serve.py:894-917: warm-ups repeat the first prompt and come before the run.
    first = fake_vllm.bodies[0]["prompt"]
    assert all(body["prompt"] == first for body in fake_vllm.bodies[:4])
    measured_ids = sorted(h["x-request-id"].rsplit("-", 1)[-1] for h in fake_vllm.headers[4:])
    assert measured_ids == ["0", "1", "2"]
    assert result.num_warmups == 4
    assert len(runner.last_records) == 3


async def test_given_prompts_replace_the_random_ones(fake_vllm: FakeVllm) -> None:
    prompts = [
        PromptRequest(index=0, prompt="the of and", prompt_len=4, expected_output_len=2),
        PromptRequest(index=1, prompt="to in is it", prompt_len=5, expected_output_len=3),
    ]
    runner = LoadRunner()
    result = await runner.run(spec(), base_url=fake_vllm.base_url, model="fake", prompts=prompts)
    assert sorted(b["prompt"] for b in fake_vllm.bodies) == ["the of and", "to in is it"]
    assert result.completed == 2 and result.total_output_tokens == 5
    assert result.num_prompts == 2 and result.not_sent == 0
    # The client's own count (prompts given with their special tokens) against usage.
    assert result.client_input_tokens == 9 and result.total_input_tokens == 4 + 5
    assert [p.prompt for p in runner.last_prompts] == ["the of and", "to in is it"]


async def test_duration_at_a_finite_rate_sends_what_the_schedule_holds(
    fake_vllm: FakeVllm,
) -> None:
    before = asyncio.all_tasks()
    runner = LoadRunner()
    result = await runner.run(
        spec(
            num_prompts=3,
            request_rate=50.0,
            burstiness=math.inf,
            max_concurrency=None,
            duration_s=0.21,
        ),
        base_url=fake_vllm.base_url,
        model="fake",
    )
    # Constant gaps of 20 ms: sends at 0.02 .. 0.20 s, all before the 0.21 s deadline,
    # cycling through the 3 prompts; the schedule decides, not the machine's speed.
    assert result.completed == 10 and result.failed == 0
    assert result.duration >= 0.2
    assert result.num_prompts == 10 and result.duration_limit_s == 0.21
    ids = [h["x-request-id"].rsplit("-", 1)[-1] for h in fake_vllm.headers]
    assert sorted(ids, key=int) == [str(i) for i in range(10)]  # unique ids when cycling
    assert len({b["prompt"] for b in fake_vllm.bodies}) == 3
    assert asyncio.all_tasks() == before


async def test_duration_at_infinite_rate_is_a_closed_loop(fake_vllm: FakeVllm) -> None:
    fake_vllm.chunk_delay_s = 0.01
    before = asyncio.all_tasks()
    result = await LoadRunner().run(
        spec(num_prompts=4, output_len=5, max_concurrency=2, duration_s=0.3),
        base_url=fake_vllm.base_url,
        model="fake",
    )
    assert result.completed >= 2 and result.failed == 0
    assert fake_vllm.max_open_streams <= 2  # never more than the slots
    assert result.not_sent == 0
    assert result.duration >= 0.3
    assert asyncio.all_tasks() == before


def test_duration_arguments_are_checked() -> None:
    # Declared once, on the spec: a run that cannot be scheduled cannot be described.
    with pytest.raises(ValueError, match="greater than 0"):
        spec(duration_s=0)
    with pytest.raises(ValueError, match="finite"):
        spec(duration_s=math.inf)
    with pytest.raises(ValueError, match="closed loop"):
        spec(max_concurrency=None, duration_s=1)
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        spec(num_warmups=-1)


async def test_cancel_during_warmups_leaves_nothing(fake_vllm: FakeVllm) -> None:
    fake_vllm.chunk_delay_s = 0.05
    before = asyncio.all_tasks()
    runner = LoadRunner()
    run = asyncio.create_task(
        runner.run(spec(output_len=200, num_warmups=2), base_url=fake_vllm.base_url, model="fake")
    )
    await until(fake_vllm, lambda: fake_vllm.open_streams == 2)
    partial = await runner.cancel()
    assert partial is not None and partial.completed == 0
    assert partial.cancelled is True and partial.not_sent == 8  # the run proper never began
    assert await run == partial
    assert asyncio.all_tasks() == before
    await until(fake_vllm, lambda: fake_vllm.open_streams == 0)


async def test_progress_carries_the_clients_own_health(fake_vllm: FakeVllm) -> None:
    fake_vllm.chunk_delay_s = 0.01
    seen: list[LoadProgress] = []
    result = await LoadRunner(progress_interval_s=0.05, lag_tick_s=0.01).run(
        spec(output_len=20, max_concurrency=2),
        base_url=fake_vllm.base_url,
        model="fake",
        on_progress=seen.append,
    )
    assert any(p.client_cpu_pct is not None and p.client_cpu_pct >= 0 for p in seen)
    assert any(p.loop_lag_mean_ms is not None for p in seen)
    assert result.client_cpu_s >= 0 and result.client_max_loop_lag_ms >= 0
    assert result.client_bound_s >= 0


class SurfacingTransport:
    """A transport whose streams, when cut, fail with the transport's own error.

    aiohttp can surface a connection closed under a cancel as ``ServerDisconnectedError``
    rather than the cancel itself; the result must still say "cancelled".
    """

    def __init__(self) -> None:
        self.open = 0
        self.streaming = asyncio.Event()
        self.cut = asyncio.Event()

    async def post(self, request: PreparedRequest, feed: BodyFeed, end: BodyEnd) -> Response:
        self.open += 1
        if self.open == 2:
            self.streaming.set()
        try:
            await self.cut.wait()
        except asyncio.CancelledError:
            raise ConnectionError("Server disconnected") from None
        raise AssertionError("never reached")

    async def preconnect(self, url: str, count: int) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def test_a_cancelled_stream_is_cancelled_whatever_error_the_transport_surfaces() -> None:
    transport = SurfacingTransport()
    runner = LoadRunner(transport=lambda n, t: transport)
    run = asyncio.create_task(
        runner.run(spec(num_prompts=6, max_concurrency=2), base_url="http://h:1", model="m")
    )
    await transport.streaming.wait()
    partial = await runner.cancel()
    assert partial is not None and partial.cancelled
    # The two open streams were cut by the cancel: "cancelled", not the transport's error;
    # the four never sent are left out; nothing is lost between the three.
    assert partial.errors == [CANCELLED_ERROR] * 2
    assert (partial.completed, partial.failed, partial.not_sent) == (0, 2, 4)
    assert await run == partial


async def test_a_flood_of_chunks_does_not_hold_a_cancel_back(fake_vllm: FakeVllm) -> None:
    # No delay between chunks and thousands of them: the client always has bytes to
    # account for. The accounting runs in slices, so the cancel still gets its turn (the
    # runner used to yield every 5 ms of reading for this, at the cost of its timestamps).
    fake_vllm.batch = 50
    runner = LoadRunner()
    run = asyncio.create_task(
        runner.run(
            spec(num_prompts=4, max_concurrency=4, output_len=200_000),
            base_url=fake_vllm.base_url,
            model="fake",
        )
    )
    await until(fake_vllm, lambda: fake_vllm.open_streams == 4)
    partial = await asyncio.wait_for(runner.cancel(), 120)  # a bound, not a speed target
    assert partial is not None and partial.cancelled and partial.failed == 4
    assert await run == partial
    await until(fake_vllm, lambda: fake_vllm.open_streams == 0)
