"""A load on the twin's virtual clock: vLLM's scheduler, a profile's step times, a trace.

:func:`run_twin_load` serves a :class:`~tui.domain.workload.LoadSpec` as ``vtc bench`` sends
it (the load generator's own send times, :func:`tui.load.arrivals.send_times`, so the twin
is judged on the arrival sequence it predicts; a concurrency cap as bench serve's
semaphore, a shared prefix, the range ratio) through :class:`~tui.sim.scheduler.Scheduler`
with step times from :class:`~tui.domain.profile.StepCoefficients` over
:func:`tui.sim.twin.step_features` (the same features ``vtc-sim serve --sim-profile``
charges). Besides each request's times it keeps a trace: every step's features and which
steps each request's latencies span, so a fit can write each measured mean as a linear
function of the coefficients for the batching this very run produced
(:func:`tui.twin.fit.fit_profile`).
"""

from __future__ import annotations

import functools
import heapq
import math
import random
from dataclasses import dataclass, field

import numpy as np

from tui.domain.profile import COEFFICIENTS, StepCoefficients
from tui.domain.workload import LoadSpec
from tui.load.arrivals import send_times
from tui.sim.scheduler import Scheduler, SchedulerConfig, SimRequest, TokenEvent
from tui.sim.twin import step_features

WIDTH = len(COEFFICIENTS)


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
    entered: float = 0.0  # it reaches the scheduler (after its own intake)
    enter_step: int = 0  # the first step whose end counts toward its latencies
    enter_fraction: float = 1.0  # the share of that step it waited (mid-step arrival)
    scheduled_step: int | None = None  # the first step that computed any of it
    first_step: int | None = None
    last_step: int | None = None

    def own(self) -> np.ndarray:
        """Its own time before the scheduler, as features: one intake of its prompt."""
        out = np.zeros(WIDTH)
        out[COEFFICIENTS.index("a0")] = 1.0
        out[COEFFICIENTS.index("a1")] = float(self.request.num_prompt_tokens)
        return out


@dataclass
class TwinTrace:
    """Every step's features and every request's span (see the module docstring)."""

    steps: list[tuple[float, ...]] = field(default_factory=list)
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
        arr = np.array(self.steps, dtype=float).reshape(-1, WIDTH)
        return np.vstack([np.zeros((1, WIDTH)), np.cumsum(arr, axis=0)])


@functools.lru_cache(maxsize=256)
def _prompts(shape: LoadShape, vocab: int) -> tuple[tuple[tuple[int, ...], int], ...]:
    """Every request's prompt ids and output length (drawn once per shape: a fit serves
    the same load many times)."""
    rng = random.Random(shape.seed)
    ids = np.random.default_rng(shape.seed)
    prefix = ids.integers(1000, vocab, shape.prefix_len).tolist()
    out = []
    for _ in range(shape.num_prompts):
        n_in, n_out = shape.input_len, shape.output_len
        if shape.range_ratio > 0:
            r = shape.range_ratio
            n_in = rng.randint(max(1, int(n_in * (1 - r))), max(1, int(n_in * (1 + r))))
            n_out = rng.randint(max(1, int(n_out * (1 - r))), max(1, int(n_out * (1 + r))))
        out.append((tuple(prefix + ids.integers(1000, vocab, n_in).tolist()), n_out))
    return tuple(out)


def build_requests(shape: LoadShape, vocab: int = 32000) -> tuple[list[SimRequest], list[float]]:
    """The prompts and planned send times of a load: bench serve's random dataset, sent
    at the load generator's own times (:func:`tui.load.arrivals.send_times`)."""
    times = send_times(max(1, shape.num_prompts), shape.request_rate, shape.burstiness, shape.seed)
    requests = [
        SimRequest(request_id=f"t{i}", prompt_ids=list(prompt), max_tokens=n_out)
        for i, (prompt, n_out) in enumerate(_prompts(shape, vocab))
    ]
    return requests, times[: shape.num_prompts]


def run_twin_load(
    config: SchedulerConfig,
    coefficients: StepCoefficients,
    shape: LoadShape,
    max_steps: int = 2_000_000,
    *,
    blocking: bool = False,
) -> TwinTrace:
    """Serve ``shape`` to completion on the virtual clock; the trace (see the module doc).

    Each request waits its own intake (``a0 + a1 * prompt tokens``) before the scheduler;
    ``blocking`` (a CPU server): that work and each streamed token also lengthen the
    engine's next step (:func:`tui.sim.twin.step_features`).
    """
    requests, planned = build_requests(shape)
    coef = tuple(float(c) for c in coefficients.as_vector())
    sched = Scheduler(config)
    trace = TwinTrace(requests=[TracedRequest(r) for r in requests])
    cap = shape.max_concurrency or len(requests)
    # (time the request reaches the scheduler, order, index)
    entering: list[tuple[float, int, int]] = []
    next_send = 0
    in_flight = 0
    now = 0.0
    intake = [0, 0]  # requests and prompt tokens taken in since the last step

    def dispatch(at: float) -> None:
        nonlocal next_send, in_flight
        while next_send < len(requests) and in_flight < cap:
            i = next_send
            traced = trace.requests[i]
            traced.dispatched = max(at, planned[i])
            n = traced.request.num_prompt_tokens
            traced.entered = traced.dispatched + coefficients.request_seconds(n)
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
            intake[0] += 1
            intake[1] += traced.request.num_prompt_tokens
            _enter(trace, traced, at)
            sched.add(traced.request)
        plan = sched.schedule(now) if sched.has_work() else None
        if plan is None or plan.empty:
            if not entering:
                break  # nothing can ever run (a request larger than the cache)
            trace.idle += max(0.0, entering[0][0] - now)
            now = max(now, entering[0][0])
            continue
        features = step_features(plan.work, intake[0], intake[1], blocking)
        intake = [0, 0]
        _mark_scheduled(plan.scheduled, by_request, steps)
        now += sum(c * f for c, f in zip(coef, features, strict=True))
        trace.steps.append(features)
        trace.step_ends.append(now)
        events = sched.complete(plan, now, lambda r: 1000 + len(r.output_ids))
        in_flight -= _mark_outputs(events, by_request, steps)
        steps += 1
        # A next step would be the first one a request sent now could wait in.
        dispatch(now)
    trace.end = now
    trace.num_preemptions = sched.num_preemptions
    trace.prefix_queries, trace.prefix_hits = sched.prefix_queries, sched.prefix_hits
    return trace


def _mark_scheduled(
    scheduled: list[tuple[SimRequest, int]], by_request: dict[int, TracedRequest], step: int
) -> None:
    """The step each newly scheduled request first ran in."""
    for req, _ in scheduled:
        traced = by_request[id(req)]
        if traced.scheduled_step is None:
            traced.scheduled_step = step


def _mark_outputs(events: list[TokenEvent], by_request: dict[int, TracedRequest], step: int) -> int:
    """Each request's first and last output step; how many requests finished."""
    finished = 0
    for ev in events:
        traced = by_request[id(ev.request)]
        if traced.first_step is None:
            traced.first_step = step
        if ev.finished:
            traced.last_step = step
            finished += 1
    return finished


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
