"""Runs a load: prompts, then the schedule, the streams, the accounting and the report.

One run is four named parts, each in its own module:

- **schedule** (:class:`~tui.load.schedule.Dispatcher`): warm-ups, then when each request
  goes (bench serve's arrivals, a duration, or a closed loop) under the concurrency cap;
- **stream** (:class:`~tui.load.client.OpenAIStreamClient` over a
  :class:`~tui.load.client.Transport`): the hot path, which stamps bytes as they arrive;
- **account** (:mod:`tui.load.account`): per-request records, live numbers once an
  interval, the client's own event-loop lag and CPU, whether it is the bottleneck;
- **report** (:func:`~tui.load.report.build_result`): the typed :class:`BenchResult`.

Beyond bench serve, a run can be cancelled: every in-flight stream is cancelled at once,
which closes its connection. That matters: vLLM's API server waits forever on open
streams after SIGTERM, so stopping a server under load needs the client gone first.
Partial results are kept.
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from tui.domain.results import BenchResult, MeasuringClient
from tui.domain.url_credentials import UrlCredential
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.account import CANCELLED_ERROR, Ledger, Ticker
from tui.load.budget import check_memory
from tui.load.client import (
    OpenAIStreamClient,
    Transport,
    TransportFactory,
    TransportKind,
    api_url,
    make_transport,
)
from tui.load.prompts import PromptRequest, Tokenizer, random_prompts
from tui.load.report import RunFacts, build_result
from tui.load.schedule import Dispatcher
from tui.load.stats import (
    DEFAULT_PERCENTILE_METRICS,
    DEFAULT_PERCENTILES,
    RequestRecord,
    validate_goodput,
    validate_percentile_metrics,
    validate_percentiles,
)
from tui.load.tokenizer import load_tokenizer

__all__ = ["CANCELLED_ERROR", "LoadRunner", "ProgressCallback"]

ProgressCallback = Callable[[LoadProgress], None]


class _Run:
    """One run's parts: the schedule, the client, the ledger and the ticker."""

    def __init__(
        self,
        spec: LoadSpec,
        prompts: Sequence[PromptRequest],
        client: OpenAIStreamClient,
        *,
        window_s: float,
        on_progress: ProgressCallback | None,
        interval_s: float,
        tick_s: float,
        refreeze: bool,
    ) -> None:
        self.spec = spec
        self.client = client
        self.ledger = Ledger(0 if spec.timed else len(prompts), window_s)
        self.dispatcher = Dispatcher(spec, prompts, self.send)
        self.ticker = Ticker(
            self.ledger.live, on_progress, interval_s=interval_s, tick_s=tick_s, refreeze=refreeze
        )
        self.cancelled = False
        self._main: asyncio.Task[None] | None = None
        self._aux: list[asyncio.Task[None]] = []

    async def send(self, key: int, prompt: PromptRequest, arrival: float) -> None:
        """One measured request, from the POST to its end, whatever the end."""
        record = self.ledger.open(key, prompt)
        if self.spec.timed:
            self.ledger.live.total = self.dispatcher.dispatched
        try:
            await self.client.send(prompt, record)
        except asyncio.CancelledError:
            record.success = False
            record.error = CANCELLED_ERROR
            raise
        finally:
            # start_time is the POST; the wait for the semaphore is queue time.
            if record.start_time:
                record.queue_time = record.start_time - arrival
            self.ledger.close(key, record)

    def cancel(self) -> None:
        """Cut every stream now; requests not sent yet never will be."""
        if self.cancelled:
            return
        self.cancelled = True
        self.ledger.cancel()
        if self._main is not None:
            self._main.cancel()
        self.dispatcher.cancel()

    async def execute(self) -> tuple[float, float, float]:
        """Warm up, dispatch, wait; ``(start, end, client CPU seconds)``.

        Returns after a cancel too, with every request settled; when this coroutine is
        itself cancelled, nothing it started outlives it.
        """
        cpu_start = time.process_time()

        async def main() -> None:
            await self.dispatcher.warm_up(self.client.send)
            await self.client.preconnect(self.dispatcher.connections_needed)
            await self.dispatcher.run(self._started)

        self._main = asyncio.create_task(main())
        if self.cancelled:  # a cancel that came before the first step
            self._main.cancel()
        try:
            await asyncio.wait({self._main})
            # Settles every request task, cancelled or not (request failures never raise).
            await asyncio.gather(*self.dispatcher.tasks, return_exceptions=True)
            end = time.perf_counter()
            if not self.cancelled and (error := self._main.exception()) is not None:
                raise error
        finally:
            # Also runs when this coroutine is cancelled: nothing may outlive it.
            leftovers = [self._main, *self._aux, *self.dispatcher.tasks]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)
        start = self.dispatcher.start if self.dispatcher.start is not None else end
        return start, end, time.process_time() - cpu_start

    def _started(self, start: float) -> None:
        self._aux.append(asyncio.create_task(self.ticker.run(start)))


class LoadRunner:
    """Runs one :class:`LoadSpec` at a time against an OpenAI-compatible server.

    Adapters come in through the constructor: ``transport`` is ``"auto"`` (default: vtc's
    own hot path, or aiohttp when a proxy applies), ``"native"``, ``"aiohttp"`` or a
    factory ``(max_connections, timeout_s) -> Transport``; ``tokenizer`` builds random
    prompts (default: the model's own ``tokenizer.json`` when it can be found, else the
    approximation, see :func:`~tui.load.tokenizer.load_tokenizer`). ``api_key`` defaults
    to ``$OPENAI_API_KEY``. ``percentiles``, ``percentile_metrics`` and ``goodput`` (SLOs
    in ms, e.g. ``{"ttft": 200}``) shape the statistics as bench serve's flags do.
    ``collect_text`` keeps every response's text (bench serve's ``generated_texts``).
    ``freeze_gc`` freezes the garbage collector's heap before the run, as bench serve does,
    and again every lag tick during it (for processes that exist to run one load; see
    :class:`~tui.load.account.Ticker`). ``client`` says in each result which client
    measured it (:data:`~tui.domain.results.MeasuringClient`).

    After a run, :attr:`last_records` holds the sent requests' measurements in dispatch
    order and :attr:`last_prompts` their prompts (for bench serve's per-request fields).
    """

    def __init__(
        self,
        *,
        transport: TransportKind | TransportFactory = "auto",
        api_key: str | None = None,
        credential: UrlCredential | None = None,
        tokenizer: Tokenizer | None = None,
        percentiles: Sequence[float] = DEFAULT_PERCENTILES,
        percentile_metrics: Sequence[str] = DEFAULT_PERCENTILE_METRICS,
        goodput: Mapping[str, float] | None = None,
        progress_interval_s: float = 1.0,
        lag_tick_s: float = 0.1,
        rolling_window_s: float = 10.0,
        collect_text: bool = False,
        freeze_gc: bool = False,
        client: MeasuringClient = "in-loop",
    ) -> None:
        if progress_interval_s <= 0 or lag_tick_s <= 0 or rolling_window_s <= 0:
            raise ValueError("progress_interval_s, lag_tick_s and rolling_window_s must be > 0")
        self._transport = transport
        self._api_key = api_key
        self._credential = credential  # the server URL's user:password (Basic), if it had one
        self._tokenizer = tokenizer
        self._tokenizers: dict[str, tuple[Tokenizer, str]] = {}
        self._percentiles = validate_percentiles(percentiles)
        self._percentile_metrics = validate_percentile_metrics(percentile_metrics)
        self._goodput = validate_goodput(goodput or {})
        self._progress_interval_s = progress_interval_s
        self._lag_tick_s = lag_tick_s
        self._rolling_window_s = rolling_window_s
        self._collect_text = collect_text
        self._freeze_gc = freeze_gc
        self._client = client
        self.last_records: list[RequestRecord] = []
        self.last_prompts: list[PromptRequest] = []
        self._run: _Run | None = None
        self._cancel_early = False  # a cancel that came while the run was still preparing
        self._finished: asyncio.Future[BenchResult | None] | None = None

    def __repr__(self) -> str:
        return f"LoadRunner(transport={self._transport!r}, running={self.running})"

    @property
    def running(self) -> bool:
        """True while :meth:`run` is in progress."""
        return self._finished is not None and not self._finished.done()

    def cancel_nowait(self) -> None:
        """Cut every stream of the current run now; returns at once (no-op when idle)."""
        if self._run is not None:
            self._run.cancel()
        elif self.running:  # still building prompts: cancelled as soon as it exists
            self._cancel_early = True

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
        except Exception:  # the run's own failure is the run's caller's to see
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

    def _make_transport(self, spec: LoadSpec, url: str) -> Transport:
        if callable(self._transport):
            return self._transport(spec.max_concurrency, spec.request_timeout_s)
        return make_transport(self._transport, spec.max_concurrency, spec.request_timeout_s, url)

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        on_progress: ProgressCallback | None = None,
        prompts: Sequence[PromptRequest] | None = None,
        goodput: Mapping[str, float] | None = None,
    ) -> BenchResult:
        """Run ``spec`` against ``base_url`` and return bench serve's numbers.

        ``goodput``: this run's SLOs (ms), in place of the runner's own (they travel with
        the request: nothing is set on the runner). ``prompts`` replaces the random prompts
        ``spec`` describes (a JSONL or ShareGPT workload). After a :meth:`cancel`, returns
        what finished: requests cut short count as failed (error ``"cancelled"``);
        requests never sent are left out and reported as ``not_sent``. ``on_progress``
        gets a :class:`LoadProgress` every ``progress_interval_s`` and once at the end;
        its exceptions are logged.
        """
        if self.running:
            raise RuntimeError("a load run is already in progress on this runner")
        slos = self._goodput if goodput is None else validate_goodput(goodput)
        finished: asyncio.Future[BenchResult | None] = asyncio.get_running_loop().create_future()
        self._finished = finished
        try:
            result = await self._measure(spec, base_url, model, on_progress, prompts, slos)
        except BaseException:
            finished.set_result(None)
            raise
        finally:
            self._run = None
            self._cancel_early = False
        finished.set_result(result)
        return result

    async def _measure(
        self,
        spec: LoadSpec,
        base_url: str,
        model: str,
        on_progress: ProgressCallback | None,
        given: Sequence[PromptRequest] | None,
        slos: Mapping[str, float],
    ) -> BenchResult:
        url = api_url(base_url, spec.endpoint)  # a bad URL fails here, before any connection
        tokenizer, tokenizer_name = self.tokenizer_for(model)
        if given is not None:
            prompts, specials = list(given), 0  # files count their prompts' special tokens
        else:
            check_memory(spec, collect_text=self._collect_text)  # before building anything
            prompts = random_prompts(spec, tokenizer)
            specials = int(tokenizer.num_special_tokens_to_add())
        self.last_records, self.last_prompts = [], []
        with self._gc_frozen():
            transport = self._make_transport(spec, url)
            try:
                client = OpenAIStreamClient(
                    transport,
                    base_url=base_url,
                    model=model,
                    endpoint=spec.endpoint,
                    api_key=self._api_key,
                    credential=self._credential,
                    ignore_eos=spec.ignore_eos,
                    temperature=spec.temperature,
                    request_timeout_s=spec.request_timeout_s,
                    request_id_prefix=f"vtc-{uuid.uuid4().hex[:8]}-",
                    collect_text=self._collect_text,
                )
                run = self._run = _Run(
                    spec,
                    prompts,
                    client,
                    window_s=self._rolling_window_s,
                    on_progress=on_progress,
                    interval_s=self._progress_interval_s,
                    tick_s=self._lag_tick_s,
                    refreeze=self._freeze_gc,
                )
                if self._cancel_early:
                    run.cancel()
                start, end, cpu_s = await run.execute()
            finally:
                await transport.aclose()
        run.ticker.final(end, start)
        records, sent = run.ledger.measured()
        self.last_records, self.last_prompts = records, sent
        facts = RunFacts(
            model_id=model,
            tokenizer_id=model,
            prompt_tokenizer=tokenizer_name,
            endpoint=spec.endpoint,
            num_prompts=len(records) if spec.timed else len(prompts),
            burstiness=spec.burstiness,
            num_warmups=spec.num_warmups,
            duration_limit_s=spec.duration_s,
            cancelled=run.cancelled,
            not_sent=0 if spec.timed else len(prompts) - len(records),
            # The client's own count of the prompts the server answered, to compare
            # with total_input_tokens (the server's usage counts).
            client_input_tokens=sum(
                p.prompt_len + specials for p, r in zip(sent, records, strict=True) if r.success
            ),
            client_cpu_s=cpu_s,
            client_max_loop_lag_ms=run.ticker.worst_lag_s * 1000.0,
            client_bound_s=run.ticker.client_bound_s,
            client=self._client,
        )
        return build_result(
            records,
            end - start,
            percentiles=self._percentiles,
            percentile_metrics=self._percentile_metrics,
            goodput=slos or None,
            count_tokens=lambda text: len(tokenizer.encode(text)),
            max_concurrency=spec.max_concurrency,
            request_rate=spec.request_rate,
            facts=facts,
        )

    @contextmanager
    def _gc_frozen(self) -> Iterator[None]:
        # serve.py's freeze_gc_heap(): the prompts and setup are never collected.
        if self._freeze_gc:
            gc.collect()
            gc.freeze()
        try:
            yield
        finally:
            if self._freeze_gc:
                gc.unfreeze()
