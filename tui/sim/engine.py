"""The asyncio engine loop: the scheduler, stepped in (scaled) real time, feeding streams.

Each step: :meth:`Scheduler.schedule`, sleep for the cost model's step time divided by
``--sim-speed``, :meth:`Scheduler.complete`, then push each produced token to its request's
queue (one chunk per token per step, as vLLM streams with ``stream_interval=1``). Steps are
paced against a running deadline so asyncio's timer slack does not accumulate.

Metrics are recorded in wall-clock seconds, i.e. what a client measures: at ``--sim-speed
10`` TTFT and ITL read ten times shorter than the simulated GPU would take.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from tui.sim.costmodel import CostModel
from tui.sim.logs import VllmLog
from tui.sim.metrics import SimMetrics
from tui.sim.scheduler import RequestStatus, Scheduler, SimRequest, StepPlan, TokenEvent
from tui.sim.tokenizer import Tokenizer


@dataclass(frozen=True)
class Chunk:
    """One item on a request's output queue: a token, or the end of the request."""

    text: str = ""
    token_id: int | None = None
    finish_reason: str | None = None  # set on the last chunk (with or without a token)


@dataclass(eq=False)
class RequestHandle:
    """What the HTTP layer holds for one submitted request."""

    request: SimRequest
    queue: asyncio.Queue[Chunk] = field(default_factory=asyncio.Queue)
    max_tokens_param: int = 0


class BusyTracker:
    """Remembers when the GPU was busy, to report utilization over a recent window."""

    def __init__(self, horizon: float = 30.0) -> None:
        self._spans: deque[tuple[float, float]] = deque()
        self._horizon = horizon

    def add(self, start: float, end: float) -> None:
        """Record one busy span."""
        if end > start:
            self._spans.append((start, end))
        while self._spans and self._spans[0][1] < end - self._horizon:
            self._spans.popleft()

    def utilization(self, now: float, window: float = 1.0) -> float:
        """Busy fraction of the last ``window`` seconds (0-1)."""
        lo = now - window
        busy = sum(max(0.0, min(e, now) - max(s, lo)) for s, e in self._spans if e > lo)
        return min(1.0, busy / window) if window > 0 else 0.0


class AsyncEngine:
    """Runs the scheduler in real time (scaled) and records vLLM's metrics."""

    def __init__(
        self,
        scheduler: Scheduler,
        cost: CostModel,
        metrics: SimMetrics,
        tokenizer: Tokenizer,
        log: VllmLog,
        speed: float = 1.0,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
        stats_interval: float = 10.0,
        kv_device: str = "GPU",
        mfu_metrics: bool = False,
        admit_delay: Callable[[int], float] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.cost = cost
        self.metrics = metrics
        self.tokenizer = tokenizer
        self.log = log
        self.speed = speed
        self.clock = clock
        self.busy = BusyTracker()
        self._rng = random.Random(seed)
        # Generated tokens carry their own text (prompt ids may collide in the id table).
        self._gen_vocab = tokenizer.generation_vocab()
        self._gen_text = dict(self._gen_vocab)
        self._mfu = mfu_metrics
        # A twin's per-request overhead (HTTP, tokenization) before the scheduler sees it.
        self._admit_delay = admit_delay
        self._lora_seen: tuple[list[str], list[str]] | None = None
        self._handles: dict[int, RequestHandle] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stats_task: asyncio.Task[None] | None = None
        self._stopped = False
        self._stats_interval = stats_interval / max(speed, 1e-9)
        self._kv_device = kv_device
        self._interval_prompt = 0
        self._interval_gen = 0
        self._interval_preempt = 0
        self._recent_prefix: deque[tuple[int, int]] = deque(maxlen=1000)
        metrics.bind_gauges(
            running=lambda: float(len(self.scheduler.running)),
            waiting=lambda: float(len(self.scheduler.waiting)),
            kv_usage=self.scheduler.pool.usage,
            deferred=lambda: float(self.scheduler.num_deferred),
        )

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the step loop and the periodic stats logger."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sim-engine")
        self._stats_task = asyncio.get_running_loop().create_task(self._stats_loop())

    async def stop(self) -> None:
        """Abort everything in flight and stop the loop."""
        self._stopped = True
        self.abort_all()
        self._wake.set()
        for task in (self._task, self._stats_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    @property
    def num_in_flight(self) -> int:
        """Requests submitted and not finished."""
        return len(self._handles)

    # -- requests ----------------------------------------------------------------------------
    def submit(
        self,
        prompt_ids: list[int],
        max_tokens: int,
        ignore_eos: bool,
        request_id: str,
        lora: str | None = None,
    ) -> RequestHandle:
        """Queue a request (under adapter ``lora``); tokens arrive on the handle's queue."""
        stop_after: int | None = None
        if not ignore_eos:
            # A model stops on its own eventually: draw where it would emit EOS.
            stop_after = self._rng.randint(16, 512)
        req = SimRequest(
            request_id=request_id,
            prompt_ids=prompt_ids,
            max_tokens=max(1, max_tokens),
            stop_after=stop_after,
            arrival=self.clock(),
            lora=lora,
        )
        handle = RequestHandle(request=req, max_tokens_param=max_tokens)
        self._handles[id(req)] = handle
        delay = self._admit_delay(len(prompt_ids)) / self.speed if self._admit_delay else 0.0
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self._admit, req)
        else:
            self._admit(req)
        return handle

    def _admit(self, req: SimRequest) -> None:
        if req.status is RequestStatus.FINISHED:
            return  # aborted before it reached the scheduler
        self.scheduler.add(req)
        self._wake.set()

    def abort(self, handle: RequestHandle) -> None:
        """Abort one request (client went away); its queue gets a final ``abort`` chunk."""
        if self.scheduler.abort(handle.request):
            self._finish(handle, "abort")

    def abort_all(self) -> None:
        """Abort every request in flight (shutdown)."""
        for handle in list(self._handles.values()):
            self.abort(handle)

    # -- the loop ----------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        while not self._stopped:
            if not self.scheduler.has_work():
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
                continue
            plan = self.scheduler.schedule(self.clock())
            if plan.empty:
                # Waiting requests that cannot be admitted and nothing running: wait for change.
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
                continue
            dt = self.cost.step_time(plan.work) / self.speed
            start = self.clock()
            deadline = max(deadline, loop.time()) + dt
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            end = self.clock()
            self.busy.add(start, end)
            events = self.scheduler.complete(plan, end, self._next_token)
            self._record_step(plan, events)

    def _next_token(self, req: SimRequest) -> int:
        return self._gen_vocab[self._rng.randrange(len(self._gen_vocab))][0]

    def reset_prefix_cache(self, reset_running_requests: bool = False) -> bool:
        """``/reset_prefix_cache``: drop the cached blocks (``v1/core/sched/scheduler.py``).

        Fails while requests hold blocks, unless ``reset_running_requests`` preempts them
        first (they are recomputed later, as in vLLM).
        """
        sched = self.scheduler
        if reset_running_requests:
            while sched.running:
                sched.preempt(sched.running.pop())
        ok = sched.pool.reset_cache()
        if ok:
            self.log.info(
                "EngineCore", self.log.src("block_pool.reset"), "Successfully reset prefix cache"
            )
        else:
            used = sched.pool.num_gpu_blocks - 1 - sched.pool.num_free
            self.log.warning(
                "EngineCore",
                self.log.src("block_pool.reset_failed"),
                f"Failed to reset prefix cache because some blocks ({used}) are not freed yet",
            )
        self._recent_prefix.clear()
        return ok

    def _record_step(self, plan: StepPlan, events: list[TokenEvent]) -> None:
        m = self.metrics
        labels = m.labels
        computed_prompt = plan.work.prefill_tokens
        self._interval_prompt += computed_prompt
        self._interval_gen += len(events)
        self._interval_preempt += len(plan.preempted)
        if m.log_stats:
            if self._mfu:
                m.estimated_flops.labels(**labels).inc(self.cost.flops(plan.work))
                m.estimated_read_bytes.labels(**labels).inc(self.cost.read_bytes(plan.work))
                m.estimated_write_bytes.labels(**labels).inc(self.cost.write_bytes(plan.work))
            if self.scheduler.config.max_loras:
                self._record_lora()
            m.iteration_tokens.labels(**labels).observe(plan.work.tokens)
            m.kv_offload_step()
            if plan.preempted:
                m.preemptions.labels(**labels).inc(len(plan.preempted))
            if events:
                m.generation_tokens.labels(**labels).inc(len(events))
        for req in plan.admitted:
            if req.num_preemptions == 0 and self.scheduler.config.enable_prefix_caching:
                # First admission only: re-admissions after preemption are not queries.
                self._recent_prefix.append((req.num_prompt_tokens, req.prefix_hit_tokens))
                if m.log_stats:
                    m.prefix_queries.labels(**labels).inc(req.num_prompt_tokens)
                    m.prefix_hits.labels(**labels).inc(req.prefix_hit_tokens)
        for ev in events:
            handle = self._handles.get(id(ev.request))
            if handle is None:
                continue
            text = self._gen_text.get(ev.token_id, "")
            req = ev.request
            if len(req.output_ids) == 1 and m.log_stats:
                hits = req.prefix_hit_tokens
                m.prompt_tokens.labels(**labels).inc(req.num_prompt_tokens)
                m.prompt_by_source.labels(**labels, source="local_compute").inc(
                    req.num_prompt_tokens - hits
                )
                m.prompt_by_source.labels(**labels, source="local_cache_hit").inc(hits)
                m.prompt_cached.labels(**labels).inc(hits)
                m.prompt_cached_by_source.labels(**labels, source="device").inc(hits)
                if req.first_token is not None:
                    m.ttft.labels(**labels).observe(req.first_token - req.arrival)
            elif len(req.token_times) >= 2 and m.log_stats:
                m.itl.labels(**labels).observe(req.token_times[-1] - req.token_times[-2])
            if ev.finished:
                handle.queue.put_nowait(Chunk(text, ev.token_id, req.finish_reason))
                self._finish(handle, req.finish_reason or "length", queue_final=False)
            else:
                handle.queue.put_nowait(Chunk(text, ev.token_id))

    def _record_lora(self) -> None:
        sched = self.scheduler
        running = sorted({r.lora for r in sched.running if r.lora is not None})
        waiting = sorted({r.lora for r in sched.waiting if r.lora is not None})
        if (running, waiting) != self._lora_seen:
            self._lora_seen = (running, waiting)
            self.metrics.record_lora(running, waiting)

    def _finish(self, handle: RequestHandle, reason: str, queue_final: bool = True) -> None:
        req = handle.request
        self._handles.pop(id(req), None)
        if queue_final:
            handle.queue.put_nowait(Chunk(finish_reason=reason))
        m = self.metrics
        if not m.log_stats:
            return
        labels = m.labels
        m.success.labels(**labels, finished_reason=reason).inc()
        if req.status is not RequestStatus.FINISHED or reason == "abort":
            return
        now = req.finished_at or self.clock()
        n_out = len(req.output_ids)
        m.e2e.labels(**labels).observe(now - req.arrival)
        m.req_prompt_tokens.labels(**labels).observe(req.num_prompt_tokens)
        m.req_gen_tokens.labels(**labels).observe(n_out)
        m.max_gen_tokens.labels(**labels).observe(handle.max_tokens_param)
        m.params_max_tokens.labels(**labels).observe(handle.max_tokens_param)
        m.params_n.labels(**labels).observe(1)
        m.req_preemptions.labels(**labels).observe(req.num_preemptions)
        m.prefill_kv_computed.labels(**labels).observe(
            req.num_prompt_tokens - req.prefix_hit_tokens
        )
        if req.first_scheduled is not None:
            m.queue_time.labels(**labels).observe(req.first_scheduled - req.arrival)
            m.inference_time.labels(**labels).observe(now - req.first_scheduled)
            if req.first_token is not None:
                m.prefill_time.labels(**labels).observe(req.first_token - req.first_scheduled)
        if req.first_token is not None and req.last_token is not None:
            decode = req.last_token - req.first_token
            m.decode_time.labels(**labels).observe(decode)
            if n_out > 1:
                m.tpot.labels(**labels).observe(decode / (n_out - 1))

    # -- periodic log line (v1/metrics/loggers.py:276-340) -------------------------------------
    async def _stats_loop(self) -> None:
        last = self.clock()
        while not self._stopped:
            await asyncio.sleep(self._stats_interval)
            now = self.clock()
            elapsed = max(now - last, 1e-9)
            last = now
            prompt, gen, pre = self._interval_prompt, self._interval_gen, self._interval_preempt
            self._interval_prompt = self._interval_gen = self._interval_preempt = 0
            running, waiting = len(self.scheduler.running), len(self.scheduler.waiting)
            if not (prompt or gen or running or waiting):
                continue  # vLLM logs the idle line at DEBUG only
            queries = sum(q for q, _ in self._recent_prefix)
            hits = sum(h for _, h in self._recent_prefix)
            rate = 100.0 * hits / queries if queries else 0.0
            parts = [
                f"Engine 000: Avg prompt throughput: {prompt / elapsed:.1f} tokens/s",
                f"Avg generation throughput: {gen / elapsed:.1f} tokens/s",
                f"Running: {running} reqs",
                f"Waiting: {waiting} reqs",
            ]
            if pre:
                parts.append(f"Preemptions: {pre}")
            parts.append(
                f"{self._kv_device} KV cache usage: {100.0 * self.scheduler.pool.usage():.1f}%"
            )
            parts.append(f"Prefix cache hit rate: {rate:.1f}%")
            self.log.info("APIServer", self.log.src("metrics.stats"), ", ".join(parts))
