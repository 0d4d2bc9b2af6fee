"""The twin's numerics, all scipy's: the linear fit of step costs and the direct polish.

:func:`fit_coefficients` solves the weighted linear rows a fit writes (each measured mean
as a linear function of the step and request costs, :mod:`tui.twin.fit`) for non-negative
coefficients: :func:`scipy.optimize.nnls` for the least squares, then
:func:`scipy.optimize.least_squares` with ``loss="huber"`` and ``bounds=(0, inf)`` so that a
load a busy machine stalled weighs like a large residual, not a squared one.

:func:`polish` is the fit's last step: the linear rows are a linearization (each measured
mean over the steps the twin ran at the previous coefficients), so it moves the
coefficients, by :func:`scipy.optimize.minimize` (Nelder-Mead over their logarithms), to
where the twin's own numbers match the measured ones best: the weighted mean absolute log
ratio of predicted to measured (L1, so one stalled load moves it little).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tui.domain.profile import COEFFICIENTS, ProfileError, StepCoefficients

HUBER_K = 1.345
"""Huber's constant, in units of the residuals' robust scale (the MAD's normal equivalent)."""
SCALE_ROUNDS = 4
"""Huber fits at most, each with the scale of the previous one's residuals."""
RIDGE = 1e-9
"""Keeps a coefficient the loads do not excite (no long contexts, say) at 0."""
FLOORS = {
    "b0": 1e-6,
    "b1": 1e-9,
    "b2": 1e-7,
    "b3": 1e-9,
    "b4": 1e-9,
    "b5": 1e-8,
    "a0": 1e-6,
    "a1": 1e-10,
    "a2": 1e-8,
}
"""Below these (seconds) a coefficient counts as zero: the polish runs on logarithms."""
POLISH_EVALS = 100
"""Twin runs of every load the polish may take when a recipe asks for one."""


@dataclass(frozen=True)
class FitRow:
    """One linear equation: ``features · coefficients ≈ target`` (seconds), with a weight.

    ``features`` follow :data:`~tui.domain.profile.COEFFICIENTS`: the step features
    (:func:`tui.sim.twin.step_features`) summed over the steps a measured time spans,
    plus the request's own intake where the time includes it.
    """

    features: tuple[float, ...]
    target: float
    weight: float = 1.0
    offset: float = 0.0  # seconds of the target no coefficient explains (taken off first)


def _system(rows: Sequence[FitRow], ridge: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The weighted, column-scaled system (ridge rows appended) and the column scales."""
    a = np.array([r.features for r in rows], dtype=float)
    y = np.array([r.target - r.offset for r in rows], dtype=float)
    w = np.sqrt(np.array([max(r.weight, 0.0) for r in rows], dtype=float))
    a, y = a * w[:, None], y * w
    scale = np.maximum(np.abs(a).max(axis=0), 1e-12)  # columns of very different sizes
    a = a / scale
    n = a.shape[1]
    a = np.vstack([a, math.sqrt(ridge) * np.eye(n)])
    y = np.concatenate([y, np.zeros(n)])
    return a, y, scale


def fit_coefficients(
    rows: Sequence[FitRow], ridge: float = RIDGE, *, robust: bool = True
) -> StepCoefficients:
    """Non-negative weighted least squares over ``rows``; Huber-robust by default.

    No coefficient goes below 0, so a twin never has a step that gets faster with more
    work. ``robust``: the least squares' answer is refined under Huber's loss, its scale
    the residuals' median absolute deviation.
    """
    from scipy import optimize  # imported when used: scipy.optimize costs ~0.4 s

    if not rows:
        raise ProfileError("nothing to fit: no measured loads")
    a, y, scale = _system(rows, ridge)
    coef, _ = optimize.nnls(a, y)
    for _ in range(SCALE_ROUNDS if robust else 0):
        # Huber's scale from the current residuals: the least squares' are inflated by the
        # very outliers it weighs down, so it is estimated again from the robust fit's.
        resid = a @ coef - y
        spread = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
        if spread <= 1e-12:
            break
        found = optimize.least_squares(
            lambda x: a @ x - y,
            np.maximum(coef, 0.0),
            jac=lambda _x: a,
            bounds=(0.0, np.inf),
            loss="huber",
            f_scale=HUBER_K * spread,
            method="trf",
        )
        # trf keeps iterates inside the bounds: one at its bound is 0, not 1e-19.
        at_bound = (found.active_mask == -1) | (found.x <= 1e-9 * float(np.abs(y).max()))
        new = np.where(at_bound, 0.0, found.x)
        done = np.allclose(new, coef, rtol=1e-4, atol=1e-12)
        coef = new
        if done:
            break
    return StepCoefficients.from_vector(coef / scale)


Points = list[tuple[float, float, float]]
Measure = Callable[[StepCoefficients], Points]


def loss_of(points: Sequence[tuple[float, float, float]]) -> float:
    """Weighted mean of ``|log(predicted / measured)|`` over ``(predicted, measured, w)``."""
    total = weights = 0.0
    for predicted, measured, w in points:
        if measured > 0:
            total += w * abs(math.log(max(predicted, 1e-12) / measured))
            weights += w
    return total / weights if weights else math.inf


def polish(
    start: StepCoefficients, measure: Measure, evals: int = POLISH_EVALS
) -> StepCoefficients:
    """Nelder-Mead (scipy's) from ``start`` on the log-coefficients; never worse than it."""
    from scipy import optimize  # imported when used: scipy.optimize costs ~0.4 s

    floors = np.array([FLOORS[n] for n in COEFFICIENTS])
    x0 = np.log(np.maximum(start.as_vector(), floors))

    def coef_of(x: np.ndarray) -> StepCoefficients:
        values = np.exp(x)
        kept = np.where(values <= floors * 1.0001, 0.0, values)
        return StepCoefficients.from_vector([float(v) for v in kept])

    def f(x: np.ndarray) -> float:
        return loss_of(measure(coef_of(x)))

    start_loss = f(x0)
    if evals <= 1 or not math.isfinite(start_loss):
        return start
    simplex = np.vstack([x0] + [x0 + 0.7 * np.eye(len(x0))[i] for i in range(len(x0))])
    found = optimize.minimize(
        f,
        x0,
        method="Nelder-Mead",
        options={"maxfev": evals, "initial_simplex": simplex, "fatol": 1e-4, "xatol": 1e-3},
    )
    return coef_of(found.x) if float(found.fun) < start_loss else start
