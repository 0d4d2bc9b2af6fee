"""Runs a load: prompts, warm-ups, arrivals, a concurrency cap, live progress, cancellation.

The run follows ``benchmark()`` in ``vllm/benchmarks/serve.py:786-1090`` (reference
sections 4.2-4.4): ``num_warmups`` copies of the first prompt are sent and awaited first
(under the same concurrency cap) and left out of every statistic; then one task per
request is created at its send time, each holding an ``asyncio.Semaphore(max_concurrency)``
while it runs; ``dur`` runs from just before the first dispatch to the gather; the numbers
are those of :mod:`tui.load.stats`.

Beyond bench serve:

- a run can be bounded by a duration instead of a count: requests are sent (cycling
  through the prompts) until ``duration_s`` has passed, then the ones in flight finish.
  With a finite rate the gaps are bench serve's, not rescaled (:func:`open_ended_times`);
  with an infinite rate it is a closed loop that starts a request whenever one of the
  ``max_concurrency`` slots frees up;
- a run can be cancelled: every in-flight stream is cancelled at once, which closes its
  connection. That matters: vLLM's API server waits forever on open streams after
  SIGTERM, so stopping a server under load needs the client gone first. Partial results
  are kept;
- live progress once a second (:mod:`tui.load.live`), with the client's own event-loop lag
  and CPU, and whether the client rather than the server is the bottleneck.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from typing import Any

from tui.domain.results import BenchResult
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.arrivals import open_ended_times, send_times
from tui.load.client import (
    OpenAIStreamClient,
    Transport,
    TransportFactory,
    TransportKind,
    api_url,
    make_transport,
)
from tui.load.live import LiveProgress, LiveStats
from tui.load.prompts import PromptRequest, Tokenizer, random_prompts
from tui.load.stats import (
    DEFAULT_PERCENTILE_METRICS,
    DEFAULT_PERCENTILES,
    RequestRecord,
    build_result,
    validate_goodput,
    validate_percentile_metrics,
    validate_percentiles,
)
from tui.load.tokenizer import load_tokenizer

log = logging.getLogger(__name__)

CANCELLED_ERROR = "cancelled"
ProgressCallback = Callable[[LoadProgress], None]


class LoadRunner:
    """Runs one :class:`LoadSpec` at a time against an OpenAI-compatible server.

    Adapters come in through the constructor: ``transport`` is ``"aiohttp"`` (default,
    the faster, see ``benchmarks/README.md``), ``"httpx"`` or a factory
    ``(max_connections, timeout_s) -> Transport``; ``tokenizer`` builds random prompts
    (default: the model's own ``tokenizer.json`` when it can be found, else the
    approximation, see :func:`~tui.load.tokenizer.load_tokenizer`). ``api_key`` defaults
    to ``$OPENAI_API_KEY``. ``percentiles``, ``percentile_metrics`` and ``goodput`` (SLOs
    in ms, e.g. ``{"ttft": 200}``) shape the statistics as bench serve's flags do.
    ``collect_text`` keeps every response's text (bench serve's ``generated_texts``);
    off, text is decoded only for responses without a usage chunk. ``freeze_gc`` freezes
    the garbage collector's heap before the run, as bench serve does (for processes that
    exist to run one load).

    After a run, :attr:`last_records` holds the sent requests' measurements in dispatch
    order and :attr:`last_prompts` their prompts (for bench serve's detailed fields).
    """

    def __init__(
        self,
        *,
        transport: TransportKind | TransportFactory = "aiohttp",
        api_key: str | None = None,
        tokenizer: Tokenizer | None = None,
        percentiles: Sequence[float] = DEFAULT_PERCENTILES,
        percentile_metrics: Sequence[str] = DEFAULT_PERCENTILE_METRICS,
        goodput: Mapping[str, float] | None = None,
        temperature: float | None = None,
        progress_interval_s: float = 1.0,
        lag_tick_s: float = 0.1,
        rolling_window_s: float = 10.0,
        collect_text: bool = False,
        freeze_gc: bool = False,
    ) -> None:
        if progress_interval_s <= 0 or lag_tick_s <= 0 or rolling_window_s <= 0:
            raise ValueError("progress_interval_s, lag_tick_s and rolling_window_s must be > 0")
        self._transport = transport
        self._api_key = api_key
        self._tokenizer = tokenizer
        self._tokenizers: dict[str, tuple[Tokenizer, str]] = {}
        self._percentiles = validate_percentiles(percentiles)
        self._percentile_metrics = validate_percentile_metrics(percentile_metrics)
        self._goodput = validate_goodput(goodput or {})
        self._temperature = temperature
        self._progress_interval_s = progress_interval_s
        self._lag_tick_s = lag_tick_s
        self._rolling_window_s = rolling_window_s
        self._collect_text = collect_text
        self._freeze_gc = freeze_gc
        self.last_records: list[RequestRecord] = []
        self.last_prompts: list[PromptRequest] = []
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

    def tokenizer_for(self, model: str) -> tuple[Tokenizer, str]:
        """``(tokenizer, description)`` used for ``model``'s random prompts (cached)."""
        if self._tokenizer is not None:
            return self._tokenizer, getattr(self._tokenizer, "name", "") or type(
                self._tokenizer
            ).__name__
        if model not in self._tokenizers:
            self._tokenizers[model] = load_tokenizer(model)
        return self._tokenizers[model]

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
        prompts: Sequence[PromptRequest] | None = None,
        duration_s: float | None = None,
        num_warmups: int = 0,
    ) -> BenchResult:
        """Run ``spec`` against ``base_url`` and return bench serve's numbers.

        ``prompts`` replaces the random prompts ``spec`` describes (a JSONL or ShareGPT
        workload); ``duration_s`` bounds the run by time instead of by count;
        ``num_warmups`` requests go first and are not measured. After a :meth:`cancel`,
        returns what finished: requests cancelled mid-stream count as failed (error
        ``"cancelled"``); requests never sent are left out and reported as ``not_sent``.
        ``on_progress`` gets a :class:`~tui.load.live.LiveProgress` every
        ``progress_interval_s`` and once at the end; its exceptions are logged, not raised.
        """
        if self.running:
            raise RuntimeError("a load run is already in progress on this runner")
        if duration_s is not None and not (duration_s > 0 and math.isfinite(duration_s)):
            raise ValueError(f"duration must be a positive number of seconds, got {duration_s}")
        if duration_s is not None and math.isinf(spec.request_rate) and not spec.max_concurrency:
            raise ValueError(
                "a run bounded by a duration at an infinite request rate needs a max "
                "concurrency (it is then a closed loop)"
            )
        if num_warmups < 0:
            raise ValueError(f"num_warmups must be >= 0, got {num_warmups}")
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[BenchResult | None] = loop.create_future()
        self._finished = finished
        self._cancel_event = asyncio.Event()
        try:
            result = await self._run(
                spec,
                base_url,
                model,
                on_progress,
                self._cancel_event,
                prompts,
                duration_s,
                num_warmups,
            )
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
        given_prompts: Sequence[PromptRequest] | None,
        duration_s: float | None,
        num_warmups: int,
    ) -> BenchResult:
        api_url(base_url, spec.endpoint)  # a bad URL fails here, before any connection
        tokenizer, tokenizer_name = self.tokenizer_for(model)
        if given_prompts is not None:
            prompts = list(given_prompts)
            specials = 0  # file workloads count prompts with their special tokens
        else:
            prompts = random_prompts(spec, tokenizer)
            specials = int(tokenizer.num_special_tokens_to_add())
        if not prompts:
            raise ValueError("no prompts to send")
        self.last_records, self.last_prompts = [], []
        if self._freeze_gc:
            # serve.py's freeze_gc_heap(): the prompts and setup are never collected.
            gc.collect()
            gc.freeze()
        try:
            transport = self._make_transport(spec)
        except BaseException:
            if self._freeze_gc:
                gc.unfreeze()
            raise
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
            collect_text=self._collect_text,
        )
        timed = duration_s is not None
        closed_loop = timed and math.isinf(spec.request_rate)
        live = LiveStats(0 if timed else len(prompts), self._rolling_window_s)
        records: dict[int, RequestRecord] = {}  # by request key, in dispatch order
        sent: dict[int, PromptRequest] = {}
        slots = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else None
        limiter: AbstractAsyncContextManager[object] = (
            slots if slots is not None and not closed_loop else nullcontext()
        )
        request_tasks: list[asyncio.Task[None]] = []
        aux_tasks: list[asyncio.Task[Any]] = []
        clock: dict[str, float] = {}

        async def one_request(key: int, prompt: PromptRequest, arrival: float) -> None:
            record = records[key] = RequestRecord(prompt_len=prompt.prompt_len)
            # In a timed run, a request that waits for a slot past the deadline is dropped.
            may_expire = timed and slots is not None and not closed_loop and slots.locked()
            try:
                async with limiter:
                    if may_expire and time.perf_counter() >= clock["deadline"]:
                        return  # never sent
                    sent[key] = prompt
                    live.started(key, record)
                    await client.send(prompt, record)
                # start_time is the POST; the wait for the semaphore is queue time.
                record.queue_time = record.start_time - arrival
            except asyncio.CancelledError:
                record.success = False
                record.error = CANCELLED_ERROR
                raise
            finally:
                if key in sent:
                    live.ended(key, record)
                if closed_loop and slots is not None:
                    slots.release()

        def request(i: int) -> tuple[int, PromptRequest]:
            prompt = prompts[i % len(prompts)]
            return i, (prompt if prompt.index == i else replace(prompt, index=i))

        async def warm_up() -> None:
            # serve.py:894-917: copies of the first prompt under the concurrency cap.
            warm_limiter: AbstractAsyncContextManager[object] = (
                asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else nullcontext()
            )

            async def one(k: int) -> None:
                async with warm_limiter:
                    # Negative indexes keep the x-request-id of each warm-up unique.
                    await client.send(replace(prompts[0], index=-1 - k))

            await asyncio.gather(*(one(k) for k in range(num_warmups)))

        async def dispatch() -> None:
            if num_warmups:
                await warm_up()
            start = clock["start"] = time.perf_counter()
            aux_tasks.append(asyncio.create_task(ticker(start)))
            if not timed:
                # Mirrors serve.py:509-516 and 1011-1090: sleep to each send time, then
                # start the request's task; the run ends when all of them are gathered.
                delays = send_times(len(prompts), spec.request_rate, spec.burstiness, spec.seed)
                for prompt, delay in zip(prompts, delays, strict=True):
                    wait = start + delay - time.perf_counter()
                    if delay > 0 and wait > 0:
                        await asyncio.sleep(wait)
                    request_tasks.append(
                        asyncio.create_task(one_request(prompt.index, prompt, time.perf_counter()))
                    )
            else:
                assert duration_s is not None
                deadline = clock["deadline"] = start + duration_s
                await (closed(deadline) if closed_loop else open_rate(start, deadline))
            await asyncio.gather(*request_tasks)

        async def open_rate(start: float, deadline: float) -> None:
            offsets: Iterator[float] = open_ended_times(
                spec.request_rate, spec.burstiness, spec.seed
            )
            for i, offset in enumerate(offsets):
                if start + offset >= deadline:
                    return
                wait = start + offset - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                key, prompt = request(i)
                live.total = key + 1
                request_tasks.append(
                    asyncio.create_task(one_request(key, prompt, time.perf_counter()))
                )

        async def closed(deadline: float) -> None:
            assert slots is not None
            i = 0
            while (left := deadline - time.perf_counter()) > 0:
                try:
                    await asyncio.wait_for(slots.acquire(), left)
                except TimeoutError:
                    return
                if time.perf_counter() >= deadline:
                    slots.release()
                    return
                key, prompt = request(i)
                i += 1
                live.total = i
                request_tasks.append(
                    asyncio.create_task(one_request(key, prompt, time.perf_counter()))
                )

        def emit(progress: LoadProgress) -> None:
            if on_progress is None:
                return
            try:
                on_progress(progress)
            except Exception:
                log.exception("load progress callback failed")

        client_bound_s = [0.0]
        worst_lag = [0.0]

        def snapshot(
            now: float, start: float, max_lag: float | None, mean_lag: float | None
        ) -> LiveProgress:
            progress = live.snapshot(
                now,
                now - start,
                max_lag_s=max_lag,
                mean_lag_s=mean_lag,
                cpu_s=time.process_time(),
            )
            return progress

        async def ticker(start: float) -> None:
            # Sleeps in short ticks: how late each tick wakes is the event-loop lag.
            max_lag = lag_sum = 0.0
            ticks = 0
            last_emit = start
            snapshot(start, start, None, None)  # sets the CPU baseline
            expected = time.perf_counter() + self._lag_tick_s
            while True:
                await asyncio.sleep(max(0.0, expected - time.perf_counter()))
                now = time.perf_counter()
                lag = max(0.0, now - expected)
                max_lag = max(max_lag, lag)
                lag_sum += lag
                ticks += 1
                expected = now + self._lag_tick_s
                if now - last_emit >= self._progress_interval_s:
                    progress = snapshot(now, start, max_lag, lag_sum / ticks)
                    if progress.client_bound:
                        client_bound_s[0] += now - last_emit
                    worst_lag[0] = max(worst_lag[0], max_lag)
                    emit(progress)
                    max_lag = lag_sum = 0.0
                    ticks = 0
                    last_emit = now

        cancelled = False
        cpu_start = time.process_time()
        dispatcher = asyncio.create_task(dispatch())
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
            end = time.perf_counter()
        finally:
            # Also runs when run() itself is cancelled: nothing may outlive it.
            leftovers: list[asyncio.Task[Any]] = [
                dispatcher,
                cancel_wait,
                *aux_tasks,
                *request_tasks,
            ]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)
            await transport.aclose()
            if self._freeze_gc:
                gc.unfreeze()
        cpu_s = time.process_time() - cpu_start
        start = clock.get("start", end)
        duration = end - start
        emit(snapshot(end, start, None, None))

        measured = [records[key] for key in records if key in sent]
        self.last_records = measured
        self.last_prompts = [sent[key] for key in records if key in sent]
        good_prompts = [p for p, r in zip(self.last_prompts, measured, strict=True) if r.success]
        result = build_result(
            measured,
            duration,
            percentiles=self._percentiles,
            percentile_metrics=self._percentile_metrics,
            goodput=self._goodput or None,
            count_tokens=lambda text: len(tokenizer.encode(text)),
            max_concurrency=spec.max_concurrency,
            request_rate=spec.request_rate,
        )
        extras: dict[str, Any] = {
            "model_id": model,
            "tokenizer_id": tokenizer_name,
            "endpoint": spec.endpoint,
            "num_prompts": len(measured) if timed else len(prompts),
            "burstiness": "inf" if math.isinf(spec.burstiness) else spec.burstiness,
            "num_warmups": num_warmups,
            "duration_limit_s": duration_s,
            "cancelled": cancelled,
            "not_sent": 0 if timed else len(prompts) - len(measured),
            # The client's own count of the prompts the server answered, to compare
            # with total_input_tokens (the server's usage counts).
            "client_input_tokens": sum(p.prompt_len + specials for p in good_prompts),
            "client_cpu_s": cpu_s,
            "client_max_loop_lag_ms": worst_lag[0] * 1000.0,
            "client_bound_s": client_bound_s[0],
        }
        return result.model_copy(update=extras)
