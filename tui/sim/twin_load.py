"""A load on the twin's virtual clock: vLLM's scheduler, a profile's step times, a trace.

:func:`run_twin_load` serves a :class:`~tui.domain.workload.LoadSpec` as ``vtc bench`` sends
it (Poisson or gamma arrivals, a concurrency cap as bench serve's semaphore, a shared
prefix, the range ratio) through :class:`~tui.sim.scheduler.Scheduler` with step times from
:class:`~tui.domain.profile.StepCoefficients`. Besides each request's times it keeps a
trace: every step's work and which steps each request's TTFT and end-to-end latency span,
so a fit can write each measured mean as a linear function of the coefficients for the
batching this very run produced (:func:`tui.twin.fit.fit_profile`).
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field

import numpy as np

from tui.domain.profile import StepCoefficients
from tui.domain.workload import LoadSpec
from tui.sim.scheduler import Scheduler, SchedulerConfig, SimRequest


@dataclass(frozen=True)
class LoadShape:
    """What the twin sends: lengths, arrivals and the concurrency cap of one load."""

    num_prompts: int
    input_len: int  # random tokens after the shared prefix
    output_len: int
    prefix_len: int = 0
    range_ratio: float = 0.0
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0

    @classmethod
    def of(cls, load: LoadSpec, input_len: int | None = None, output_len: int | None = None):
        """``load``'s shape (``input_len``/``output_len``: measured means, when known)."""
        return cls(
            num_prompts=load.num_prompts,
            input_len=max(1, input_len if input_len is not None else load.input_len),
            output_len=max(1, output_len if output_len is not None else load.output_len),
            prefix_len=load.prefix_len,
            range_ratio=load.range_ratio,
            request_rate=load.request_rate,
            burstiness=load.burstiness,
            max_concurrency=load.max_concurrency,
            seed=load.seed,
        )


@dataclass
class TracedRequest:
    """One request's times on the virtual clock and the steps its latencies span."""

    request: SimRequest
    dispatched: float = 0.0  # the client sends it (after the concurrency cap)
    entered: float = 0.0  # it reaches the scheduler (after the request overhead)
    enter_step: int = 0  # the first step whose end counts toward its latencies
    enter_fraction: float = 1.0  # the share of that step it waited (mid-step arrival)
    first_step: int | None = None
    last_step: int | None = None
    # Its time before the scheduler as the overheads make it: ``units * a0 + tokens * a1 +
    # offset`` (one request's own overhead; with a serial front end, also those queued
    # ahead of it in the same busy period, and ``offset`` <= 0 when that began earlier).
    frontend_units: int = 1
    frontend_tokens: int = 0
    frontend_offset: float = 0.0


@dataclass
class TwinTrace:
    """Every step's features and every request's span (see the module docstring)."""

    steps: list[tuple[float, float, float, float]] = field(default_factory=list)
    step_ends: list[float] = field(default_factory=list)
    requests: list[TracedRequest] = field(default_factory=list)
    idle: float = 0.0  # seconds the engine waited for arrivals
    num_preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    start: float = 0.0
    end: float = 0.0

    @property
    def finished(self) -> list[TracedRequest]:
        """Requests that got their last token."""
        return [t for t in self.requests if t.request.finished_at is not None]

    def cumulative(self) -> np.ndarray:
        """Prefix sums of the step features (row k: steps 0..k-1), for span sums."""
        arr = np.array(self.steps, dtype=float).reshape(-1, 4)
        return np.vstack([np.zeros((1, 4)), np.cumsum(arr, axis=0)])


def build_requests(shape: LoadShape, vocab: int = 32000) -> tuple[list[SimRequest], list[float]]:
    """The prompts and planned send times of a load (bench serve's random dataset)."""
    rng = random.Random(shape.seed)
    prefix = [rng.randrange(1000, vocab) for _ in range(shape.prefix_len)]
    t = 0.0
    requests, times = [], []
    for i in range(shape.num_prompts):
        if math.isfinite(shape.request_rate):
            if math.isinf(shape.burstiness):
                t += 1.0 / shape.request_rate
            else:
                theta = 1.0 / (shape.request_rate * shape.burstiness)
                t += rng.gammavariate(shape.burstiness, theta)
        n_in, n_out = shape.input_len, shape.output_len
        if shape.range_ratio > 0:
            r = shape.range_ratio
            n_in = rng.randint(max(1, int(n_in * (1 - r))), max(1, int(n_in * (1 + r))))
            n_out = rng.randint(max(1, int(n_out * (1 - r))), max(1, int(n_out * (1 + r))))
        body = [rng.randrange(1000, vocab) for _ in range(n_in)]
        requests.append(SimRequest(request_id=f"t{i}", prompt_ids=prefix + body, max_tokens=n_out))
        times.append(t)
    return requests, times


def run_twin_load(
    config: SchedulerConfig,
    coefficients: StepCoefficients,
    shape: LoadShape,
    max_steps: int = 2_000_000,
    *,
    serial_frontend: bool = False,
) -> TwinTrace:
    """Serve ``shape`` to completion on the virtual clock; the trace (see the module doc).

    ``serial_frontend``: the API server takes requests in one at a time (each waits for the
    overheads of those ahead of it), instead of each only for its own.
    """
    requests, planned = build_requests(shape)
    sched = Scheduler(config)
    trace = TwinTrace(requests=[TracedRequest(r) for r in requests])
    cap = shape.max_concurrency or len(requests)
    # (time the request reaches the scheduler, order, index)
    entering: list[tuple[float, int, int]] = []
    next_send = 0
    in_flight = 0
    now = 0.0

    front = _FrontEnd(coefficients, serial_frontend)

    def dispatch(at: float) -> None:
        nonlocal next_send, in_flight
        while next_send < len(requests) and in_flight < cap:
            i = next_send
            traced = trace.requests[i]
            traced.dispatched = max(at, planned[i])
            front.take(traced)
            heapq.heappush(entering, (traced.entered, i, i))
            next_send += 1
            in_flight += 1

    dispatch(0.0)
    by_request = {id(t.request): t for t in trace.requests}
    steps = 0
    while (entering or sched.has_work()) and steps < max_steps:
        while entering and entering[0][0] <= now:
            at, _, i = heapq.heappop(entering)
            traced = trace.requests[i]
            traced.request.arrival = traced.dispatched
            _enter(trace, traced, at)
            sched.add(traced.request)
        plan = sched.schedule(now) if sched.has_work() else None
        if plan is None or plan.empty:
            if not entering:
                break  # nothing can ever run (a request larger than the cache)
            trace.idle += max(0.0, entering[0][0] - now)
            now = max(now, entering[0][0])
            continue
        work = plan.work
        features = (
            1.0,
            float(work.prefill_tokens),
            float(work.decode_seqs),
            work.context_tokens / 1000.0,
        )
        now += coefficients.step_seconds(work.prefill_tokens, work.decode_seqs, work.context_tokens)
        trace.steps.append(features)
        trace.step_ends.append(now)
        events = sched.complete(plan, now, lambda r: 1000 + len(r.output_ids))
        for ev in events:
            traced = by_request[id(ev.request)]
            if traced.first_step is None:
                traced.first_step = steps
            if ev.finished:
                traced.last_step = steps
                in_flight -= 1
        steps += 1
        # A next step would be the first one a request sent now could wait in.
        dispatch(now)
    trace.end = now
    trace.num_preemptions = sched.num_preemptions
    trace.prefix_queries, trace.prefix_hits = sched.prefix_queries, sched.prefix_hits
    return trace


class _FrontEnd:
    """The API server's intake: each request's overhead, serial or side by side."""

    def __init__(self, coefficients: StepCoefficients, serial: bool) -> None:
        self.c, self.serial = coefficients, serial
        self.free = -math.inf  # when the intake is next idle
        self.busy_start, self.units, self.tokens = 0.0, 0, 0

    def take(self, t: TracedRequest) -> None:
        n = t.request.num_prompt_tokens
        if not self.serial or t.dispatched >= self.free:  # idle: a new busy period
            self.busy_start, self.units, self.tokens = t.dispatched, 0, 0
        self.units += 1
        self.tokens += n
        t.frontend_units, t.frontend_tokens = self.units, self.tokens
        t.frontend_offset = self.busy_start - t.dispatched
        t.entered = self.busy_start + self.units * self.c.a0 + self.tokens * self.c.a1
        if self.serial:
            self.free = t.entered


def _enter(trace: TwinTrace, traced: TracedRequest, at: float) -> None:
    """Where ``traced`` joins the step sequence: the next step, or the rest of one running."""
    traced.enter_step = len(trace.steps)
    traced.enter_fraction = 1.0
    if trace.step_ends and trace.step_ends[-1] > at:  # it came while that step ran
        k = len(trace.steps) - 1
        start = trace.step_ends[k - 1] if k > 0 else 0.0
        span = trace.step_ends[k] - start
        traced.enter_step = k
        traced.enter_fraction = (trace.step_ends[k] - at) / span if span > 0 else 0.0
