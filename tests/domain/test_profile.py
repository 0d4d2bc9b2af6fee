"""The profile's pure parts: the least-squares fit, errors, identities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tui.domain.profile import (
    FitRow,
    ProfileError,
    ProfileIdentity,
    Residual,
    StepCoefficients,
    fit_coefficients,
    identity_mismatch,
    measured_error,
)


def _rows(truth: StepCoefficients, n: int = 40, seed: int = 1) -> list[FitRow]:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        high = [500, 5e4, 5e3, 900, 64, 9e4]
        feats = tuple(float(x) for x in rng.uniform([1, 0, 0, 0, 1, 0], high))
        rows.append(FitRow(feats, float(np.dot(feats, truth.as_vector())), 1.0))
    return rows


def test_the_fit_finds_the_coefficients_its_rows_were_made_with() -> None:
    truth = StepCoefficients(b0=0.004, b1=3e-5, b2=3e-4, b3=2e-4, a0=0.003, a1=1e-5)
    got = fit_coefficients(_rows(truth))
    assert np.allclose(got.as_vector(), truth.as_vector(), rtol=1e-4, atol=1e-9)


def test_a_coefficient_the_data_would_make_negative_is_held_at_zero() -> None:
    truth = StepCoefficients(b0=0.004, b1=3e-5, b2=3e-4)
    rows = _rows(truth)
    # Noise that pulls the unconstrained b3 below zero: more context, slightly less time.
    rows = [FitRow(r.features, r.target - 1e-7 * r.features[3], r.weight) for r in rows]
    got = fit_coefficients(rows)
    assert got.b3 == 0.0
    assert all(v >= 0 for v in got.as_vector())
    assert got.b0 == pytest.approx(truth.b0, rel=0.05)


def test_nothing_to_fit_is_one_clear_error() -> None:
    with pytest.raises(ProfileError, match="nothing to fit"):
        fit_coefficients([])


def test_step_time_is_zero_for_an_empty_step_and_linear_otherwise() -> None:
    c = StepCoefficients(b0=0.001, b1=1e-5, b2=1e-4, b3=1e-3)
    assert c.step_seconds(0, 0, 0) == 0.0
    assert c.step_seconds(100, 4, 2000) == pytest.approx(0.001 + 1e-3 + 4e-4 + 2e-3)


def test_measured_error_is_the_median_and_worst_absolute_percentage() -> None:
    rs = [
        Residual(sample="a", metric="m", measured=100.0, predicted=110.0),
        Residual(sample="b", metric="m", measured=100.0, predicted=95.0),
        Residual(sample="c", metric="n", measured=50.0, predicted=80.0),
    ]
    err = measured_error(rs)
    assert err.median_pct == pytest.approx(10.0)
    assert err.worst_pct == pytest.approx(60.0)
    assert err.per_metric == {"m": pytest.approx(7.5), "n": pytest.approx(60.0)}
    assert err.label() == "±10%"
    assert math.isinf(measured_error([]).median_pct)


def test_another_server_is_named_field_by_field() -> None:
    ours = ProfileIdentity(model="m", device="cpu", device_kind="cpu", vllm_version="0.32.0")
    assert identity_mismatch(ours, ours) == []
    other = ours.model_copy(update={"vllm_version": "0.33.0", "device": "NVIDIA H100"})
    assert identity_mismatch(ours, other) == [
        "device NVIDIA H100 (profile: cpu)",
        "vLLM 0.33.0 (profile: 0.32.0)",
    ]
