"""scipy's numerics on problems with a known answer: rows made from known coefficients."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tui.domain.profile import COEFFICIENTS, ProfileError, StepCoefficients
from tui.twin.numerics import FitRow, fit_coefficients, loss_of, polish

TRUTH = StepCoefficients(
    b0=0.004, b1=3e-5, b2=3e-4, b3=2e-4, b4=5e-3, b5=2e-5, a0=0.003, a1=1e-5, a2=4e-5
)


def _rows(truth: StepCoefficients, n: int = 40, seed: int = 1) -> list[FitRow]:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        high = [500, 5e4, 5e3, 900, 400, 6e3, 64, 9e4, 5e3]
        feats = tuple(float(x) for x in rng.uniform([1, 0, 0, 0, 0, 0, 1, 0, 0], high))
        rows.append(FitRow(feats, float(np.dot(feats, truth.as_vector())), 1.0))
    return rows


def test_the_fit_finds_the_coefficients_its_rows_were_made_with() -> None:
    for robust in (False, True):
        got = fit_coefficients(_rows(TRUTH), robust=robust)
        assert np.allclose(got.as_vector(), TRUTH.as_vector(), rtol=1e-4, atol=1e-9)


def test_offsets_and_weights_are_taken_into_account() -> None:
    rows = [FitRow(r.features, r.target + 0.5, 1.0 / r.target**2, 0.5) for r in _rows(TRUTH)]
    got = fit_coefficients(rows)
    assert np.allclose(got.as_vector(), TRUTH.as_vector(), rtol=1e-4, atol=1e-9)


def test_a_coefficient_the_data_would_make_negative_is_held_at_zero() -> None:
    truth = StepCoefficients(b0=0.004, b1=3e-5, b2=3e-4)
    rows = _rows(truth)
    # Noise that pulls the unconstrained b3 below zero: more context, slightly less time.
    rows = [FitRow(r.features, r.target - 1e-7 * r.features[3], r.weight) for r in rows]
    got = fit_coefficients(rows)
    assert got.b3 == 0.0
    assert all(v >= 0 for v in got.as_vector())
    assert got.b0 == pytest.approx(truth.b0, rel=0.05)


def test_a_few_stalled_loads_barely_move_the_robust_fit() -> None:
    rows = _rows(TRUTH, n=60, seed=3)
    rng = np.random.default_rng(4)
    noisy = [FitRow(r.features, r.target * (1 + rng.normal(0, 0.01)), r.weight) for r in rows]
    # Six loads a busy machine stalled: three times as long as the coefficients say.
    stalled = [
        FitRow(r.features, 3 * r.target, r.weight) if i % 10 == 0 else r
        for i, r in enumerate(noisy)
    ]
    robust = fit_coefficients(stalled).as_vector()
    plain = fit_coefficients(stalled, robust=False).as_vector()
    truth = TRUTH.as_vector()
    big = [COEFFICIENTS.index(n) for n in ("b1", "b2")]  # the well-excited, dominant costs
    robust_err = np.abs(robust[big] - truth[big]) / truth[big]
    plain_err = np.abs(plain[big] - truth[big]) / truth[big]
    assert np.all(robust_err < 0.05)
    assert robust_err.sum() < plain_err.sum()


def test_nothing_to_fit_is_one_clear_error() -> None:
    with pytest.raises(ProfileError, match="nothing to fit"):
        fit_coefficients([])


def test_the_polish_finds_the_minimum_of_a_known_response_and_is_never_worse() -> None:
    # A "twin" whose metrics are a known smooth function of the coefficients: the polish
    # must recover the coefficients that made the measured values.
    weights = np.array([3.0, 5e3, 800.0, 50.0, 20.0, 300.0, 2.0, 1e3, 600.0])

    def response(c: StepCoefficients) -> float:
        return float(np.dot(weights, c.as_vector()))

    truth = StepCoefficients(b0=0.004, b1=3e-5, b2=3e-4, b3=0.0, a0=0.003, a1=1e-5)
    probes = [np.roll(weights, k) for k in range(len(weights))]

    def measure(c: StepCoefficients) -> list[tuple[float, float, float]]:
        v = c.as_vector()
        return [(float(np.dot(p, v)), float(np.dot(p, truth.as_vector())), 1.0) for p in probes]

    start = StepCoefficients(b0=0.006, b1=2e-5, b2=4e-4, b3=0.0, a0=0.002, a1=1.5e-5)
    got = polish(start, measure, evals=600)
    assert loss_of(measure(got)) < 0.1 * loss_of(measure(start))
    assert response(got) == pytest.approx(response(truth), rel=0.02)
    best = polish(truth, measure, evals=50)
    assert loss_of(measure(best)) <= loss_of(measure(truth)) + 1e-12


def test_the_loss_is_the_weighted_mean_absolute_log_ratio() -> None:
    assert loss_of([(2.0, 1.0, 1.0), (1.0, 1.0, 3.0)]) == pytest.approx(math.log(2) / 4)
    assert math.isinf(loss_of([]))
