"""Runs a load: prompts, arrivals, a concurrency cap, live progress, cancellation.

The run follows ``benchmark()`` in ``vllm/benchmarks/serve.py:786-1090`` (reference
sections 4.2-4.4): one task per request created at its send time, each holding an
``asyncio.Semaphore(max_concurrency)`` while it runs, ``dur`` measured from just before
the first dispatch to the gather, and the statistics of :mod:`tui.load.stats`.

Unlike bench serve, a run can be cancelled: every in-flight stream is cancelled at once,
which closes its connection. That matters: vLLM's API server waits forever on open
streams after SIGTERM, so stopping a server under load needs the client gone first.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

import numpy as np

from tui.domain.results import BenchResult
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.arrivals import send_times
from tui.load.client import (
    OpenAIStreamClient,
    Transport,
    TransportFactory,
    TransportKind,
    api_url,
    make_transport,
)
from tui.load.prompts import ApproxTokenizer, PromptRequest, Tokenizer, random_prompts
from tui.load.stats import (
    DEFAULT_PERCENTILE_METRICS,
    DEFAULT_PERCENTILES,
    RequestRecord,
    build_result,
    validate_goodput,
    validate_percentile_metrics,
    validate_percentiles,
)

log = logging.getLogger(__name__)

CANCELLED_ERROR = "cancelled"
ProgressCallback = Callable[[LoadProgress], None]


class _Live:
    """Counters and rolling windows behind the once-a-second progress."""

    def __init__(self, total: int, window_s: float) -> None:
        self.total = total
        self.window_s = window_s
        self.done = 0
        self.failed = 0
        self.in_flight = 0
        self.chunk_times: deque[float] = deque(maxlen=1_000_000)
        self.ttfts: deque[tuple[float, float]] = deque(maxlen=100_000)
        self.itls: deque[tuple[float, float]] = deque(maxlen=200_000)

    def on_chunk(self, timestamp: float, is_first: bool, delta: float) -> None:
        self.chunk_times.append(timestamp)
        (self.ttfts if is_first else self.itls).append((timestamp, delta))

    def snapshot(self, now: float, elapsed: float, loop_lag_s: float | None) -> LoadProgress:
        horizon = now - self.window_s
        for window in (self.ttfts, self.itls):
            while window and window[0][0] < horizon:
                window.popleft()
        while self.chunk_times and self.chunk_times[0] < now - 1.0:
            self.chunk_times.popleft()
        ttft_p50, ttft_p99 = _p50_p99([v for _, v in self.ttfts])
        itl_p50, itl_p99 = _p50_p99([v for _, v in self.itls])
        return LoadProgress(
            elapsed=elapsed,
            done=self.done,
            failed=self.failed,
            in_flight=self.in_flight,
            total=self.total,
            # Chunks in the last second: one token per chunk at vLLM's default
            # stream interval, the same count bench serve's peak tok/s uses.
            output_tokens_per_s=float(len(self.chunk_times)),
            ttft_p50_ms=ttft_p50,
            ttft_p99_ms=ttft_p99,
            itl_p50_ms=itl_p50,
            itl_p99_ms=itl_p99,
            loop_lag_ms=None if loop_lag_s is None else loop_lag_s * 1000.0,
        )


def _p50_p99(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    p50, p99 = np.percentile(values, [50.0, 99.0])
    return float(p50) * 1000.0, float(p99) * 1000.0


class LoadRunner:
    """Runs one :class:`LoadSpec` at a time against an OpenAI-compatible server.

    Adapters come in through the constructor: ``transport`` is ``"httpx"`` (default),
    ``"aiohttp"`` or a factory ``(max_connections, timeout_s) -> Transport``; ``tokenizer``
    builds prompts (default :class:`ApproxTokenizer`). ``api_key`` defaults to
    ``$OPENAI_API_KEY``. ``percentiles``, ``percentile_metrics`` and ``goodput`` (SLOs in
    ms, e.g. ``{"ttft": 200}``) shape the statistics as bench serve's flags do.
    """

    def __init__(
        self,
        *,
        transport: TransportKind | TransportFactory = "httpx",
        api_key: str | None = None,
        tokenizer: Tokenizer | None = None,
        percentiles: Sequence[float] = DEFAULT_PERCENTILES,
        percentile_metrics: Sequence[str] = DEFAULT_PERCENTILE_METRICS,
        goodput: Mapping[str, float] | None = None,
        temperature: float | None = None,
        progress_interval_s: float = 1.0,
        lag_tick_s: float = 0.1,
        rolling_window_s: float = 10.0,
    ) -> None:
        if progress_interval_s <= 0 or lag_tick_s <= 0 or rolling_window_s <= 0:
            raise ValueError("progress_interval_s, lag_tick_s and rolling_window_s must be > 0")
        self._transport = transport
        self._api_key = api_key
        self._tokenizer: Tokenizer = tokenizer if tokenizer is not None else ApproxTokenizer()
        self._percentiles = validate_percentiles(percentiles)
        self._percentile_metrics = validate_percentile_metrics(percentile_metrics)
        self._goodput = validate_goodput(goodput or {})
        self._temperature = temperature
        self._progress_interval_s = progress_interval_s
        self._lag_tick_s = lag_tick_s
        self._rolling_window_s = rolling_window_s
        self._cancel_event: asyncio.Event | None = None
        self._finished: asyncio.Future[BenchResult | None] | None = None

    def __repr__(self) -> str:
        return f"LoadRunner(transport={self._transport!r}, running={self.running})"

    @property
    def running(self) -> bool:
        """True while :meth:`run` is in progress."""
        return self._finished is not None and not self._finished.done()

    def cancel_nowait(self) -> None:
        """Ask the current run to stop; returns at once. A no-op when nothing runs."""
        if self._cancel_event is not None:
            self._cancel_event.set()

    async def cancel(self) -> BenchResult | None:
        """Cancel every in-flight stream at once and wait for the run to wrap up.

        Returns what the run returns: the partial result, or the full one if the run
        had already ended on its own; None if no run was started or the run raised.
        When this returns, every task the run started has ended and every connection is
        closed.
        """
        finished = self._finished
        if finished is None:
            return None
        self.cancel_nowait()
        try:
            return await asyncio.shield(finished)
        except Exception:
            return None

    def _make_transport(self, spec: LoadSpec) -> Transport:
        if callable(self._transport):
            return self._transport(spec.max_concurrency, spec.request_timeout_s)
        return make_transport(self._transport, spec.max_concurrency, spec.request_timeout_s)

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        on_progress: ProgressCallback | None = None,
    ) -> BenchResult:
        """Run ``spec`` against ``base_url`` and return bench serve's numbers.

        After a :meth:`cancel`, returns what finished: requests cancelled mid-stream count
        as failed (error ``"cancelled"``); requests never sent are left out and reported
        as ``not_sent``. ``on_progress`` gets a :class:`LoadProgress` every
        ``progress_interval_s`` and once at the end; its exceptions are logged, not raised.
        """
        if self.running:
            raise RuntimeError("a load run is already in progress on this runner")
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[BenchResult | None] = loop.create_future()
        self._finished = finished
        self._cancel_event = asyncio.Event()
        try:
            result = await self._run(spec, base_url, model, on_progress, self._cancel_event)
        except BaseException:
            finished.set_result(None)
            raise
        finished.set_result(result)
        return result

    async def _run(
        self,
        spec: LoadSpec,
        base_url: str,
        model: str,
        on_progress: ProgressCallback | None,
        cancel_event: asyncio.Event,
    ) -> BenchResult:
        api_url(base_url, spec.endpoint)  # a bad URL fails here, before any connection
        prompts = random_prompts(spec, self._tokenizer)
        delays = send_times(spec.num_prompts, spec.request_rate, spec.burstiness, spec.seed)
        transport = self._make_transport(spec)
        client = OpenAIStreamClient(
            transport,
            base_url=base_url,
            model=model,
            endpoint=spec.endpoint,
            api_key=self._api_key,
            ignore_eos=spec.ignore_eos,
            temperature=self._temperature,
            request_timeout_s=spec.request_timeout_s,
            request_id_prefix=f"vtc-{uuid.uuid4().hex[:8]}-",
        )
        live = _Live(spec.num_prompts, self._rolling_window_s)
        records = [RequestRecord(prompt_len=p.prompt_len) for p in prompts]
        sent = [False] * len(prompts)
        limiter: AbstractAsyncContextManager[object] = (
            asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else nullcontext()
        )
        request_tasks: list[asyncio.Task[None]] = []

        async def one_request(prompt: PromptRequest, arrival: float) -> None:
            record = records[prompt.index]
            try:
                async with limiter:
                    sent[prompt.index] = True
                    live.in_flight += 1
                    try:
                        await client.send(prompt, record, live.on_chunk)
                    finally:
                        live.in_flight -= 1
                # start_time is the POST; the wait for the semaphore is queue time.
                record.queue_time = record.start_time - arrival
            except asyncio.CancelledError:
                record.success = False
                record.error = CANCELLED_ERROR
                raise
            finally:
                if sent[prompt.index]:
                    live.done += 1
                    live.failed += 0 if record.success else 1

        async def dispatch(start: float) -> None:
            # Mirrors serve.py:509-516 and 1011-1090: sleep to each send time, then
            # start the request's task; the run ends when all of them are gathered.
            for prompt, delay in zip(prompts, delays, strict=True):
                wait = start + delay - time.perf_counter()
                if delay > 0 and wait > 0:
                    await asyncio.sleep(wait)
                request_tasks.append(asyncio.create_task(one_request(prompt, time.perf_counter())))
            await asyncio.gather(*request_tasks)

        def emit(progress: LoadProgress) -> None:
            if on_progress is None:
                return
            try:
                on_progress(progress)
            except Exception:
                log.exception("load progress callback failed")

        async def ticker(start: float) -> None:
            # Sleeps in short ticks: how late each tick wakes is the event-loop lag.
            max_lag = 0.0
            last_emit = start
            expected = time.perf_counter() + self._lag_tick_s
            while True:
                await asyncio.sleep(max(0.0, expected - time.perf_counter()))
                now = time.perf_counter()
                max_lag = max(max_lag, now - expected)
                expected = now + self._lag_tick_s
                if now - last_emit >= self._progress_interval_s:
                    emit(live.snapshot(now, now - start, max_lag))
                    max_lag = 0.0
                    last_emit = now

        cancelled = False
        start = time.perf_counter()
        dispatcher = asyncio.create_task(dispatch(start))
        progress_task = asyncio.create_task(ticker(start))
        cancel_wait = asyncio.create_task(cancel_event.wait())
        try:
            await asyncio.wait({dispatcher, cancel_wait}, return_when=asyncio.FIRST_COMPLETED)
            if not dispatcher.done():
                cancelled = True
                dispatcher.cancel()
                for task in request_tasks:
                    task.cancel()
            # Settles every request task, cancelled or not; with no cancel this just
            # collects the dispatcher (request failures never raise).
            await asyncio.gather(dispatcher, *request_tasks, return_exceptions=True)
            duration = time.perf_counter() - start
        finally:
            # Also runs when run() itself is cancelled: nothing may outlive it.
            leftovers: list[asyncio.Task[Any]] = [
                dispatcher,
                progress_task,
                cancel_wait,
                *request_tasks,
            ]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)
            await transport.aclose()

        now = time.perf_counter()
        emit(live.snapshot(now, now - start, None))
        measured = [record for record, was_sent in zip(records, sent, strict=True) if was_sent]
        result = build_result(
            measured,
            duration,
            percentiles=self._percentiles,
            percentile_metrics=self._percentile_metrics,
            goodput=self._goodput or None,
            count_tokens=lambda text: len(self._tokenizer.encode(text)),
            max_concurrency=spec.max_concurrency,
            request_rate=spec.request_rate,
        )
        extras = {
            "model_id": model,
            "endpoint": spec.endpoint,
            "num_prompts": spec.num_prompts,
            "burstiness": "inf" if math.isinf(spec.burstiness) else spec.burstiness,
            "cancelled": cancelled,
            "not_sent": len(prompts) - len(measured),
        }
        return result.model_copy(update=extras)
