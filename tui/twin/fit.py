"""Fitting a profile's step and request costs to measured loads, on the twin itself.

:func:`fit_profile` serves each measured load on the twin (so the step mix is the batching
the twin produces), writes each measured mean (TTFT, TPOT, E2EL, and the busy time behind
the throughput) as a linear function of the coefficients over the steps it spans, solves
them (:func:`tui.twin.numerics.fit_coefficients`), and again until the coefficients settle
(a fixed point: the schedule depends on the step times); then
:func:`tui.twin.numerics.polish` moves them to where the twin's own numbers match best.
:func:`fit_best` also chooses the API server's intake (side by side or serial) on the
fitted loads alone. :func:`measure` reads a twin run as bench serve would.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from tui.domain.prediction import ErrorSource, Prediction
from tui.domain.profile import (
    FitSample,
    Profile,
    ProfileError,
    Residual,
    StepCoefficients,
    measured_error,
    sample_metrics,
)
from tui.sim.scheduler import SchedulerConfig
from tui.sim.twin import twin_config
from tui.sim.twin_load import LoadShape, TracedRequest, TwinTrace, run_twin_load
from tui.twin.numerics import POLISH_EVALS, FitRow, Points, fit_coefficients, polish

INITIAL = StepCoefficients(b0=0.005, b1=0.00005, b2=0.0002, b3=0.0, a0=0.002, a1=0.0)
"""Where a fit starts (a small model on a small machine); it moves far in a few rounds."""
FIT_ROUNDS = 8
# How much each measured mean counts. The run's duration (throughput) and end-to-end
# latency are where the tokens ended up; the client's TTFT and TPOT also carry when a busy
# API server let them out (a stalled server streams a burst), so they count less.
METRIC_WEIGHTS = {"mean_ttft_ms": 0.35, "mean_tpot_ms": 0.35, "mean_e2el_ms": 1.0}
FIT_TOLERANCE = 0.005  # relative change of every coefficient that ends the rounds


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
    itl: list[float] = []
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
        mean_e2el_ms=_mean(e2e),
        p99_e2el_ms=_pct(e2e, 99),
    )


def serve(
    config: SchedulerConfig, coefficients: StepCoefficients, shape: LoadShape, serial: bool
) -> Prediction:
    """``shape`` served on the twin and read as bench serve would (:func:`measure`)."""
    return measure(run_twin_load(config, coefficients, shape, serial_frontend=serial))


def _span(steps: np.ndarray, cum: np.ndarray, t: TracedRequest, last: int | None) -> np.ndarray:
    """The step features a request's latency spans, up to step ``last``."""
    assert last is not None
    k = t.enter_step
    head = t.enter_fraction * steps[k] if k < len(steps) else np.zeros(4)
    return head + cum[last + 1] - cum[min(k + 1, last + 1)]


def _rows(trace: TwinTrace, measured: dict[str, float]) -> list[FitRow]:
    """Each measured mean as a linear function of the coefficients (seconds)."""
    done = trace.finished
    if not done or not trace.steps:
        return []
    cum = trace.cumulative()
    steps = np.array(trace.steps, dtype=float)
    ttft: list[np.ndarray] = []
    e2e: list[np.ndarray] = []
    tpot: list[np.ndarray] = []
    offsets: list[float] = []
    for t in done:
        over = np.array([float(t.frontend_units), float(t.frontend_tokens)])
        offsets.append(t.frontend_offset)
        first = _span(steps, cum, t, t.first_step)
        full = _span(steps, cum, t, t.last_step)
        ttft.append(np.concatenate([first, over]))
        e2e.append(np.concatenate([full, over]))
        n = len(t.request.output_ids)
        if n > 1:
            tpot.append(np.concatenate([(full - first) / (n - 1), np.zeros(2)]))
    rows = []
    targets = (("mean_ttft_ms", ttft), ("mean_e2el_ms", e2e), ("mean_tpot_ms", tpot))
    offset = float(np.mean(offsets))
    for key, feats in targets:
        if key in measured and feats:
            target = measured[key] / 1000.0
            mean = np.mean(feats, axis=0)
            off = 0.0 if key == "mean_tpot_ms" else offset
            weight = METRIC_WEIGHTS.get(key, 1.0) / target**2
            rows.append(FitRow(tuple(float(x) for x in mean), target, weight, off))
    if "output_throughput" in measured:
        out = sum(len(t.request.output_ids) for t in done)
        duration = out / measured["output_throughput"]
        busy = duration - trace.idle
        if busy > 0:
            total = np.concatenate([cum[-1], np.zeros(2)])
            rows.append(FitRow(tuple(float(x) for x in total), busy, 1.0 / duration**2))
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
    return serve(tc.config, profile.coefficients, shape_of(sample), profile.serial_frontend)


def residuals_of(profile: Profile, samples: Sequence[FitSample]) -> list[Residual]:
    """Measured against the twin, metric by metric, for every sample."""
    out = []
    for sample in samples:
        run = replay(profile, sample)
        if run is None:
            continue
        for key, value in sample_metrics(sample.result).items():
            out.append(
                Residual(sample=sample.name, metric=key, measured=value, predicted=run.metric(key))
            )
    return out


Case = tuple[SchedulerConfig, LoadShape, FitSample]


def _points(cases: Sequence[Case], serial: bool, coef: StepCoefficients) -> Points:
    """Every sample's (predicted, measured, weight) for a set of coefficients."""
    out = []
    for config, shape, sample in cases:
        run = serve(config, coef, shape, serial)
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


def _settle(profile: Profile, cases: Sequence[Case], rounds: int) -> StepCoefficients:
    """The linear fit's fixed point (at most ``rounds`` rounds)."""
    coef = profile.coefficients if profile.coefficients.as_vector().any() else INITIAL
    serial = profile.serial_frontend
    for _ in range(rounds):
        rows: list[FitRow] = []
        for config, shape, s in cases:
            trace = run_twin_load(config, coef, shape, serial_frontend=serial)
            rows.extend(_rows(trace, sample_metrics(s.result)))
        new = fit_coefficients(rows)
        old_v, new_v = coef.as_vector(), new.as_vector()
        settled = np.all(np.abs(new_v - old_v) <= FIT_TOLERANCE * np.maximum(np.abs(old_v), 1e-7))
        coef = new
        if settled:
            break
    return coef


def fit_profile(
    profile: Profile,
    samples: Sequence[FitSample],
    *,
    rounds: int = FIT_ROUNDS,
    polish_evals: int = POLISH_EVALS,
) -> Profile:
    """``profile`` with coefficients fitted to ``samples``, its residuals and fit error.

    The samples may come from different command lines (a sweep's real trials): each is
    served with its own flags. ``polish_evals``: twin runs of every sample the polish may
    take (0: the least squares alone, for a quick refit). The fit error is in-sample: the
    validation error is :func:`tui.twin.validation.validate`'s.
    """
    if not samples:
        raise ProfileError("nothing to fit: no measured loads")
    cases = _cases(profile, samples)
    if not cases:
        raise ProfileError("none of the measured command lines would start on this profile")
    coef = _settle(profile, cases, rounds)
    if polish_evals > 0:
        serial = profile.serial_frontend
        coef = polish(coef, lambda c: _points(cases, serial, c), polish_evals)
    fitted = profile.model_copy(update={"coefficients": coef, "samples": list(samples)})
    res = residuals_of(fitted, [c[2] for c in cases])
    return fitted.model_copy(update={"residuals": res, "fit_error": measured_error(res)})


def fit_best(
    profile: Profile, samples: Sequence[FitSample], *, polish_evals: int = POLISH_EVALS
) -> Profile:
    """:func:`fit_profile` with the API server's intake side by side and serial: both by
    least squares, the one whose fit error (median, then worst) on ``samples`` is lower
    then polished (the structure is chosen on the fitted loads alone)."""
    variants = [profile.model_copy(update={"serial_frontend": s}) for s in (False, True)]
    fits = [fit_profile(v, samples, polish_evals=0) for v in variants]
    best = min(fits, key=lambda p: (p.fit_error.median_pct, p.fit_error.worst_pct))
    return fit_profile(best, samples, rounds=0, polish_evals=polish_evals)
