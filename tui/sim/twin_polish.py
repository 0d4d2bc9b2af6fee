"""The last step of a fit: the coefficients moved to what the twin reports, directly.

The least squares of :func:`tui.sim.twin.fit_profile` fit a linearization: each measured
mean over the steps the twin ran at the previous coefficients. On a busy machine the
client's TTFT and TPOT carry bursts (a stalled API server lets tokens out together), and
that fixed point can settle far from the coefficients that reproduce the loads best. This
step starts there and minimizes, by Nelder-Mead over the logarithms of the coefficients,
the weighted mean absolute log ratio of predicted to measured metrics over every sample:
the same comparison the profile's error reports (L1, so one stalled load moves it little).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tui.domain.profile import COEFFICIENTS, FitSample, StepCoefficients, sample_metrics
from tui.sim.scheduler import SchedulerConfig
from tui.sim.twin_load import LoadShape, run_twin_load

#: Below these (seconds) a coefficient counts as zero: the search runs on their logarithms.
FLOORS = {"b0": 1e-6, "b1": 1e-9, "b2": 1e-7, "b3": 1e-9, "a0": 1e-6, "a1": 1e-10}
POLISH_EVALS = 100

Measure = Callable[[StepCoefficients], list[tuple[float, float, float]]]


def loss_of(points: Sequence[tuple[float, float, float]]) -> float:
    """Weighted mean of ``|log(predicted / measured)|`` over ``(predicted, measured, w)``."""
    total = weights = 0.0
    for predicted, measured, w in points:
        if measured > 0:
            total += w * abs(math.log(max(predicted, 1e-12) / measured))
            weights += w
    return total / weights if weights else math.inf


def measurer(
    cases: Sequence[tuple[SchedulerConfig, LoadShape, FitSample]],
    serial_frontend: bool,
    weights: dict[str, float],
) -> Measure:
    """Every sample's (predicted, measured, weight) for a set of coefficients."""
    from tui.sim.twin import measure  # the twin's bench-serve numbers (no import cycle)

    def points(coef: StepCoefficients) -> list[tuple[float, float, float]]:
        out = []
        for config, shape, sample in cases:
            run = measure(run_twin_load(config, coef, shape, serial_frontend=serial_frontend))
            for key, value in sample_metrics(sample.result).items():
                out.append((run.metric(key), value, weights.get(key, 1.0)))
        return out

    return points


def polish(
    start: StepCoefficients, measure: Measure, evals: int = POLISH_EVALS
) -> StepCoefficients:
    """Nelder-Mead from ``start`` on the log-coefficients; the best found (never worse)."""
    floors = np.array([FLOORS[n] for n in COEFFICIENTS])
    x0 = np.log(np.maximum(start.as_vector(), floors))

    def coef_of(x: np.ndarray) -> StepCoefficients:
        values = np.exp(x)
        kept = np.where(values <= floors * 1.0001, 0.0, values)
        return StepCoefficients.from_vector([float(v) for v in kept])

    def f(x: np.ndarray) -> float:
        return loss_of(measure(coef_of(x)))

    simplex = [x0] + [x0 + np.eye(len(x0))[i] * 0.7 for i in range(len(x0))]
    values = [f(x) for x in simplex]
    used = len(simplex)
    while used < evals:
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if values[-1] - values[0] < 1e-4:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        reflected = centroid + (centroid - worst)
        fr = f(reflected)
        used += 1
        if fr < values[0]:
            expanded = centroid + 2.0 * (centroid - worst)
            fe = f(expanded)
            used += 1
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (worst - centroid)
            fc = f(contracted)
            used += 1
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:  # shrink toward the best
                best = simplex[0]
                simplex = [best] + [best + 0.5 * (x - best) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
                used += len(simplex) - 1
    best = int(np.argmin(values))
    return coef_of(simplex[best]) if values[best] < f(x0) else start
