"""The profile's pure parts: errors, identities, older files (the fit: tests/twin)."""

from __future__ import annotations

import math

import pytest

from tui.domain.prediction import ErrorSource, TwinMetric
from tui.domain.profile import (
    MeasuredError,
    ProfileIdentity,
    Residual,
    StepCoefficients,
    identity_mismatch,
    measured_error,
)


def test_step_time_is_zero_for_an_empty_step_and_linear_otherwise() -> None:
    c = StepCoefficients(b0=0.001, b1=1e-5, b2=1e-4, b3=1e-3, b4=2e-3, b5=1e-5)
    assert c.step_seconds(0, 0, 0) == 0.0
    # 100 prefill tokens, 4 decodes reading 2,000 KV tokens, 5,050 prefill pairs, 5 sequences
    assert c.step_seconds(100, 4, 2000, 5050, 5) == pytest.approx(
        0.001 + 1e-3 + 4e-4 + 2e-3 + 2e-3 * 5050 / 1e6 + 5e-5
    )


def test_the_coefficients_times_a_feature_vector_is_the_same_time() -> None:
    c = StepCoefficients(b0=0.001, b1=1e-5, b2=1e-4, b3=1e-3, a0=0.002, a1=1e-6, a2=1e-5)
    features = (1, 100, 4, 2.0, 0, 5, 1, 64, 4)
    expected = c.step_seconds(100, 4, 2000, 0, 5) + 0.002 + 64e-6 + 4e-5
    assert c.seconds(features) == pytest.approx(expected)


def test_measured_error_states_an_interval_not_a_median() -> None:
    m, n = TwinMetric.OUTPUT_THROUGHPUT, TwinMetric.MEAN_E2EL
    rs = [
        Residual(sample="a", metric=m, measured=100.0, predicted=110.0),
        Residual(sample="b", metric=m, measured=100.0, predicted=95.0),
        Residual(sample="c", metric=n, measured=50.0, predicted=80.0),
        # A tail is scored (its own record) but never part of the fitted metrics' figures.
        Residual(sample="c", metric=TwinMetric.P99_TTFT, measured=50.0, predicted=150.0),
    ]
    err = measured_error(rs)
    assert err.median_pct == pytest.approx(10.0)
    assert err.worst_pct == pytest.approx(60.0)
    of_m, of_n = err.of(m), err.of(n)
    assert of_m is not None and of_n is not None
    assert (of_m.median_pct, of_m.worst_pct, of_m.count) == (pytest.approx(7.5), 10.0, 2)
    assert of_n.median_pct == pytest.approx(60.0)
    assert err.interval(TwinMetric.P99_TTFT) == pytest.approx(200.0)
    # The stated interval covers four new outcomes in five: from three errors, the largest.
    assert err.interval_pct == pytest.approx(60.0)
    assert err.label() == "±60%" and err.stated_for(m) == pytest.approx(10.0)
    assert err.interval(TwinMetric.P99_ITL) is None
    assert err.stated_for(TwinMetric.P99_ITL) == err.stated_pct
    assert err.source is ErrorSource.FIT and err.count == 3
    assert math.isinf(measured_error([]).median_pct)


def test_an_older_error_without_an_interval_states_its_median_and_reads_its_source() -> None:
    old = MeasuredError.model_validate({"median_pct": 9.0, "worst_pct": 30.0, "source": "fit"})
    assert old.interval_pct is None and old.stated_pct == 9.0
    held = MeasuredError.model_validate({"median_pct": 1, "worst_pct": 2, "source": "held-out"})
    assert held.source is ErrorSource.VALIDATION
    # Per-metric dicts of an older file are read into typed records.
    older = MeasuredError.model_validate(
        {
            "median_pct": 5,
            "worst_pct": 9,
            "per_metric": {"mean_e2el_ms": 4.0, "made_up": 1.0},
            "interval_per_metric": {"mean_e2el_ms": 7.0},
        }
    )
    assert older.interval(TwinMetric.MEAN_E2EL) == 7.0 and len(older.metrics) == 1


def test_another_server_is_named_field_by_field() -> None:
    ours = ProfileIdentity(model="m", device="cpu", device_kind="cpu", vllm_version="0.32.0")
    assert identity_mismatch(ours, ours) == []
    other = ours.model_copy(update={"vllm_version": "0.33.0", "device": "NVIDIA H100"})
    assert identity_mismatch(ours, other) == [
        "device NVIDIA H100 (profile: cpu)",
        "vLLM 0.33.0 (profile: 0.32.0)",
    ]
