"""Fitting a profile's step and request costs to measured loads, on the twin itself.

:func:`fit_profile` serves each measured load on the twin (so the step mix is the batching
the twin produces), writes each measured mean as a linear function of the coefficients
over the steps it spans, solves them (:func:`tui.twin.numerics.fit_coefficients`), and
again until the coefficients settle (a fixed point: the schedule depends on the step
times). The rows (BLIS's training repo stacks them the same way, ``twin-step-models.md``):

- the client's means: TTFT, TPOT, E2EL and the busy time behind the output throughput;
- the server's own clock where its ``/metrics`` gave it (:class:`~tui.domain.profile.ServerSide`):
  each request's mean queue, prefill and decode time, spans of engine steps alone, so
  the engine's costs are told apart from the API server's.

Before any timing counts, the twin's engine steps per load are checked against the
server's own count (:func:`step_check`). :func:`measure` reads a twin run as bench serve
would. The whole recipe is :class:`FitRecipe`: what a calibration ships is what each
validation fold runs (:mod:`tui.twin.validation`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tui.domain.prediction import ErrorSource, Prediction, TwinMetric
from tui.domain.profile import (
    SCORED_METRICS,
    FitSample,
    Profile,
    ProfileError,
    Residual,
    ServerSide,
    StepCheck,
    StepCoefficients,
    measured_error,
    sample_metrics,
)
from tui.sim.scheduler import SchedulerConfig
from tui.sim.twin import twin_config
from tui.sim.twin_load import WIDTH, LoadShape, TracedRequest, TwinTrace, run_twin_load
from tui.twin.numerics import FitRow, Points, fit_coefficients, polish

INITIAL = StepCoefficients(b0=0.005, b1=0.00005, b2=0.0002, a0=0.002)
"""Where a fit starts (a small model on a small machine); it moves far in a few rounds."""
FIT_ROUNDS = 4
"""Rounds of the linear fit at most: the batching settles in two or three."""
# How much each measured mean counts. The run's duration (throughput) and end-to-end
# latency are where the tokens ended up; the client's TTFT and TPOT also carry when a busy
# API server let them out (a stalled server streams a burst), so they count less. The
# server's own phase times are the engine's clock: no client in them.
METRIC_WEIGHTS = {
    TwinMetric.MEAN_TTFT: 0.5,
    TwinMetric.MEAN_TPOT: 0.35,
    TwinMetric.MEAN_E2EL: 1.0,
    TwinMetric.OUTPUT_THROUGHPUT: 1.0,
}
SERVER_WEIGHT = 0.5  # each of the server's queue, prefill and decode means
FIT_TOLERANCE = 0.005  # relative change of every coefficient that ends the rounds


@dataclass(frozen=True)
class FitRecipe:
    """Every choice a fit makes, in one record: the calibration ships a profile fitted
    with it and each validation fold refits with the very same (nothing chosen on loads
    a fold leaves out)."""

    rounds: int = FIT_ROUNDS
    polish_evals: int = 0  # Nelder-Mead twin runs of every load after the linear fit
    server_rows: bool = True  # the server's /metrics phase times as rows


DEFAULT_RECIPE = FitRecipe()


def _pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p)) if values else 0.0


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def measure(trace: TwinTrace) -> Prediction:
    """bench serve's numbers for a twin run (requests that finished), not yet labelled
    with a profile (:func:`tui.twin.predict.predict` labels it)."""
    done = trace.finished
    ttft: list[float] = []
    e2e: list[float] = []
    tpot: list[float] = []
    itl: list[float] = []  # every gap of every request, as bench serve pools them
    out_tokens = 0
    end = 0.0
    for t in done:
        r = t.request
        assert r.first_token is not None and r.finished_at is not None
        ttft.append(1000.0 * (r.first_token - t.dispatched))
        e2e.append(1000.0 * (r.finished_at - t.dispatched))
        n = len(r.output_ids)
        out_tokens += n
        if n > 1:
            tpot.append(1000.0 * (r.finished_at - r.first_token) / (n - 1))
            itl.extend(1000.0 * (b - a) for a, b in itertools.pairwise(r.token_times))
        end = max(end, r.finished_at)
    dur = end if end > 0 else 0.0
    return Prediction(
        profile="",
        error_pct=math.nan,
        error_source=ErrorSource.UNFITTED,
        starts=True,
        completed=len(done),
        duration_s=dur,
        output_throughput=out_tokens / dur if dur else 0.0,
        request_throughput=len(done) / dur if dur else 0.0,
        mean_ttft_ms=_mean(ttft),
        p90_ttft_ms=_pct(ttft, 90),
        p99_ttft_ms=_pct(ttft, 99),
        mean_tpot_ms=_mean(tpot),
        mean_itl_ms=_mean(itl),
        p99_itl_ms=_pct(itl, 99),
        mean_e2el_ms=_mean(e2e),
        p99_e2el_ms=_pct(e2e, 99),
    )


@functools.lru_cache(maxsize=128)
def traced(
    config: SchedulerConfig, coefficients: StepCoefficients, shape: LoadShape, blocking: bool
) -> TwinTrace:
    """:func:`tui.sim.twin_load.run_twin_load`, once per argument set: a fit's first
    round (every fold starts from :data:`INITIAL`) and a prediction asked again reuse it.
    A trace is read, never changed, once made."""
    return run_twin_load(config, coefficients, shape, blocking=blocking)


def serve(
    config: SchedulerConfig, coefficients: StepCoefficients, shape: LoadShape, blocking: bool
) -> Prediction:
    """``shape`` served on the twin and read as bench serve would (:func:`measure`)."""
    return measure(traced(config, coefficients, shape, blocking))


def _span(steps: np.ndarray, cum: np.ndarray, t: TracedRequest, last: int | None) -> np.ndarray:
    """The step features a request's latency spans from its entry up to step ``last``."""
    assert last is not None
    k = t.enter_step
    if last < k:
        return np.zeros(WIDTH)
    head = t.enter_fraction * steps[k] if k < len(steps) else np.zeros(WIDTH)
    return head + cum[last + 1] - cum[min(k + 1, last + 1)]


def _row(feats: list[np.ndarray], target_s: float, weight: float) -> FitRow:
    """The mean of ``feats`` against a mean time, weighted relative to its size."""
    mean = np.mean(feats, axis=0)
    return FitRow(tuple(float(x) for x in mean), target_s, weight / target_s**2)


def _client_rows(trace: TwinTrace, measured: dict[TwinMetric, float]) -> list[FitRow]:
    """Each of the client's measured means as a linear function of the coefficients."""
    done = trace.finished
    cum = trace.cumulative()
    steps = np.array(trace.steps, dtype=float)
    ttft: list[np.ndarray] = []
    e2e: list[np.ndarray] = []
    tpot: list[np.ndarray] = []
    for t in done:
        own = t.own()
        first = _span(steps, cum, t, t.first_step)
        full = _span(steps, cum, t, t.last_step)
        ttft.append(first + own)
        e2e.append(full + own)
        n = len(t.request.output_ids)
        if n > 1:
            tpot.append((full - first) / (n - 1))
    rows = []
    for key, feats in (
        (TwinMetric.MEAN_TTFT, ttft),
        (TwinMetric.MEAN_E2EL, e2e),
        (TwinMetric.MEAN_TPOT, tpot),
    ):
        if key in measured and feats:
            rows.append(_row(feats, measured[key] / 1000.0, METRIC_WEIGHTS[key]))
    if TwinMetric.OUTPUT_THROUGHPUT in measured:
        out = sum(len(t.request.output_ids) for t in done)
        duration = out / measured[TwinMetric.OUTPUT_THROUGHPUT]
        busy = duration - trace.idle
        if busy > 0:
            weight = METRIC_WEIGHTS[TwinMetric.OUTPUT_THROUGHPUT]
            rows.append(FitRow(tuple(float(x) for x in cum[-1]), busy, weight / duration**2))
    return rows


def _server_rows(trace: TwinTrace, server: ServerSide) -> list[FitRow]:
    """The server's own mean queue, prefill and decode times (its engine clock: spans of
    steps alone), as vLLM stamps them: queued to first scheduled, to first token, to last."""
    cum = trace.cumulative()
    steps = np.array(trace.steps, dtype=float)
    queue: list[np.ndarray] = []
    prefill: list[np.ndarray] = []
    decode: list[np.ndarray] = []
    for t in trace.finished:
        if t.scheduled_step is None or t.first_step is None or t.last_step is None:
            continue
        queue.append(_span(steps, cum, t, t.scheduled_step - 1))
        prefill.append(cum[t.first_step + 1] - cum[t.scheduled_step])
        decode.append(cum[t.last_step + 1] - cum[t.first_step + 1])
    rows = []
    for value, feats in ((server.queue_s, queue), (server.prefill_s, prefill)):
        if value is not None and value > 1e-4 and feats:
            rows.append(_row(feats, value, SERVER_WEIGHT))
    if server.decode_s is not None and server.decode_s > 1e-4 and decode:
        rows.append(_row(decode, server.decode_s, SERVER_WEIGHT))
    return rows


def _rows(trace: TwinTrace, sample: FitSample, recipe: FitRecipe) -> list[FitRow]:
    """Every row a measured sample gives (see the module docstring)."""
    if not trace.finished or not trace.steps:
        return []
    rows = _client_rows(trace, sample_metrics(sample.result))
    if recipe.server_rows and sample.server is not None:
        rows.extend(_server_rows(trace, sample.server))
    return rows


def shape_of(sample: FitSample) -> LoadShape:
    """The sample's load with the lengths the server actually saw (measured means)."""
    res = sample.result
    n = max(res.completed, 1)
    if not res.completed:
        return LoadShape.of(sample.load)
    input_len = round(res.total_input_tokens / n) - sample.load.prefix_len
    return LoadShape.of(sample.load, input_len, round(res.total_output_tokens / n))


def replay(profile: Profile, sample: FitSample) -> Prediction | None:
    """The twin's run of a measured sample (``None``: that command would not start)."""
    tc = twin_config(profile, sample.flags)
    if tc.config is None:
        return None
    return serve(tc.config, profile.coefficients, shape_of(sample), profile.frontend_blocks)


def residuals_of(profile: Profile, samples: Sequence[FitSample]) -> list[Residual]:
    """Measured against the twin, metric by metric (the tails too), for every sample."""
    out = []
    for sample in samples:
        run = replay(profile, sample)
        if run is None:
            continue
        for key, value in sample_metrics(sample.result, SCORED_METRICS).items():
            out.append(
                Residual(sample=sample.name, metric=key, measured=value, predicted=run.metric(key))
            )
    return out


Case = tuple[SchedulerConfig, LoadShape, FitSample]


def _points(cases: Sequence[Case], blocking: bool, coef: StepCoefficients) -> Points:
    """Every sample's (predicted, measured, weight) for a set of coefficients."""
    out = []
    for config, shape, sample in cases:
        run = serve(config, coef, shape, blocking)
        for key, value in sample_metrics(sample.result).items():
            out.append((run.metric(key), value, METRIC_WEIGHTS.get(key, 1.0)))
    return out


def _cases(profile: Profile, samples: Sequence[FitSample]) -> list[Case]:
    """The samples whose command lines start on the profile's server, with their limits."""
    out = []
    for s in samples:
        config = twin_config(profile, s.flags).config
        if config is not None:
            out.append((config, shape_of(s), s))
    return out


def _settle(profile: Profile, cases: Sequence[Case], recipe: FitRecipe) -> StepCoefficients:
    """The linear fit's fixed point (at most ``recipe.rounds`` rounds)."""
    coef = profile.coefficients if profile.coefficients.as_vector().any() else INITIAL
    for _ in range(recipe.rounds):
        rows: list[FitRow] = []
        for config, shape, s in cases:
            trace = traced(config, coef, shape, profile.frontend_blocks)
            rows.extend(_rows(trace, s, recipe))
        new = fit_coefficients(rows)
        old_v, new_v = coef.as_vector(), new.as_vector()
        settled = np.all(np.abs(new_v - old_v) <= FIT_TOLERANCE * np.maximum(np.abs(old_v), 1e-7))
        coef = new
        if settled:
            break
    return coef


def server_phases(trace: TwinTrace) -> ServerSide:
    """What the server's own ``/metrics`` would count over a twin run: its steps and each
    request's mean queue, prefill and decode time (the twin's side of :class:`ServerSide`)."""
    ends = [0.0, *trace.step_ends]
    queue: list[float] = []
    prefill: list[float] = []
    decode: list[float] = []
    for t in trace.finished:
        if t.scheduled_step is None or t.first_step is None or t.last_step is None:
            continue
        started = ends[t.scheduled_step]
        queue.append(max(0.0, started - t.entered))
        prefill.append(ends[t.first_step + 1] - started)
        decode.append(ends[t.last_step + 1] - ends[t.first_step + 1])
    return ServerSide(
        steps=len(trace.steps),
        requests=len(queue),
        queue_s=_mean(queue) if queue else None,
        prefill_s=_mean(prefill) if prefill else None,
        decode_s=_mean(decode) if decode else None,
    )


def step_check(profile: Profile, samples: Sequence[FitSample]) -> StepCheck | None:
    """The twin's engine steps per load against the server's own count (``None``: the
    server counted none). The step count depends on the batching alone (the scheduler's
    rules, the arrivals and the intake's order), so a large difference is a scheduler or
    load error, found here before a timing is fitted to hide it."""
    diffs: list[tuple[float, str]] = []
    for sample in samples:
        server = sample.server.steps if sample.server is not None else sample.server_steps
        tc = twin_config(profile, sample.flags)
        if not server or tc.config is None:
            continue
        trace = traced(tc.config, profile.coefficients, shape_of(sample), profile.frontend_blocks)
        diffs.append((100.0 * abs(len(trace.steps) - server) / server, sample.name))
    if not diffs:
        return None
    worst = max(diffs)
    return StepCheck(
        loads=len(diffs),
        median_pct=float(np.median([d for d, _ in diffs])),
        worst_pct=worst[0],
        worst_load=worst[1],
    )


def fit_profile(
    profile: Profile, samples: Sequence[FitSample], recipe: FitRecipe = DEFAULT_RECIPE
) -> Profile:
    """``profile`` with coefficients fitted to ``samples`` by ``recipe``, its residuals and
    fit error (in-sample; the validation error is :func:`tui.twin.validation.validate`'s,
    and a profile refitted here states none until validated again).

    The samples may come from different command lines (a sweep's real trials): each is
    served with its own flags.
    """
    if not samples:
        raise ProfileError("nothing to fit: no measured loads")
    cases = _cases(profile, samples)
    if not cases:
        raise ProfileError("none of the measured command lines would start on this profile")
    coef = _settle(profile, cases, recipe)
    if recipe.polish_evals > 0:
        blocking = profile.frontend_blocks
        coef = polish(coef, lambda c: _points(cases, blocking, c), recipe.polish_evals)
    fitted = profile.model_copy(
        update={"coefficients": coef, "samples": list(samples), "validation": None}
    )
    res = residuals_of(fitted, [c[2] for c in cases])
    return fitted.model_copy(update={"residuals": res, "fit_error": measured_error(res)})
