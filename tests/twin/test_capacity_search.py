"""The capacity search: on a queue whose answer is known, and on the simulator's twin."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from fakes.capacity_twin import QueueTwin
from fakes.profiles import cpu_profile

from tui.domain.capacity import Limit
from tui.domain.prediction import ErrorSource, MetricInterval, Prediction, TwinMetric
from tui.domain.sweep.slo import SloLimits
from tui.domain.workload import LoadSpec
from tui.twin.capacity import (
    MOST_PREDICTIONS,
    CapacityError,
    search,
    stated_interval,
    twin_capacity,
)
from tui.twin.predict import predict

SLO = SloLimits(limits={"p99_ttft_ms": 500.0})
WORKLOAD = LoadSpec(num_prompts=100)


@pytest.mark.parametrize("error", [0.0, 10.0, 50.0])
def test_the_highest_rate_and_its_interval_match_the_queue(error: float) -> None:
    twin = QueueTwin(throughput=10.0, base_ms=100.0, error_pct=error)
    answer = search(twin, WORKLOAD, SLO, target_rate=40.0)
    assert answer.limit is Limit.SLO
    assert answer.max_rate == pytest.approx(twin.max_rate(500.0), rel=0.02)
    # the interval's edges: where the SLO statistic times (1 + e) and (1 - e) cross the SLO
    assert answer.low == pytest.approx(twin.max_rate(500.0, 1 + error / 100), rel=0.03)
    assert answer.high == pytest.approx(twin.max_rate(500.0, 1 - error / 100), rel=0.03)
    assert answer.low <= answer.max_rate <= answer.high
    assert answer.replicas is not None
    assert answer.replicas.needed == math.ceil(40.0 / answer.max_rate)
    assert len(twin.rates) == answer.predictions <= MOST_PREDICTIONS
    assert len(set(twin.rates)) == len(twin.rates)  # none predicted twice


def test_the_curve_spans_light_load_to_saturation() -> None:
    twin = QueueTwin()
    answer = search(twin, WORKLOAD, SLO)
    rates = [p.rate for p in answer.curve]
    assert rates == sorted(rates) and min(rates) <= 1.0 and max(rates) >= 9.9
    assert math.inf in twin.rates  # the saturated run sized the search
    assert all(p.rate < math.inf for p in answer.curve)
    assert answer.saturation == 10.0


def test_with_a_time_per_load_each_rate_s_prediction_is_sized_as_its_real_load() -> None:
    twin = QueueTwin(throughput=1.0, base_ms=100.0)  # a slow server: 100 requests = minutes
    loads: list[LoadSpec] = []

    def seen(load: LoadSpec) -> Prediction:
        loads.append(load)
        return twin(load)

    answer = search(seen, WORKLOAD, SLO, load_seconds=40.0)
    assert answer.load_seconds == 40.0
    for load in loads:  # the saturated run sends the workload; each rate its sized load
        assert load.num_prompts == answer.load_at(load.request_rate).num_prompts
    assert {ld.num_prompts for ld in loads if ld.request_rate == math.inf} == {100}
    finite = [ld for ld in loads if math.isfinite(ld.request_rate)]
    assert all(20 <= ld.num_prompts <= 40 for ld in finite)
    assert answer.max_rate == pytest.approx(twin.max_rate(500.0), rel=0.02)  # same answer


def test_a_latency_above_the_slo_even_unloaded_holds_no_rate() -> None:
    answer = search(QueueTwin(base_ms=600.0), WORKLOAD, SLO, target_rate=5.0)
    assert answer.limit is Limit.UNMET and answer.max_rate == 0.0
    assert answer.replicas is not None and answer.replicas.needed is None
    assert answer.predictions <= 3


def test_an_slo_met_at_saturation_is_capped_by_the_throughput() -> None:
    answer = search(QueueTwin(base_ms=0.1), WORKLOAD, SLO)
    assert answer.limit is Limit.THROUGHPUT and answer.max_rate == 10.0
    assert (answer.low, answer.high) == (10.0, 10.0)  # no throughput interval stated: none


@pytest.mark.parametrize("error", [8.0, 40.0])
def test_a_throughput_bound_answer_carries_the_throughput_s_interval(error: float) -> None:
    twin = QueueTwin(base_ms=0.1, throughput_error_pct=error)
    answer = search(twin, WORKLOAD, SLO)
    assert answer.limit is Limit.THROUGHPUT and answer.max_rate == 10.0
    assert answer.low == pytest.approx(10.0 * (1 - error / 100))
    assert answer.high == pytest.approx(10.0 * (1 + error / 100))


@pytest.mark.parametrize("starts", [True, False])
def test_the_answer_s_time_is_its_clock_s(starts: bool) -> None:
    """The seconds an answer took are read off its clock, from before the first prediction
    to after the last (the console and the JSON show them)."""
    ticks = iter([100.0, 102.5])
    answer = search(QueueTwin(starts=starts), WORKLOAD, SLO, clock=lambda: next(ticks))
    assert answer.seconds == 2.5


def test_flags_that_do_not_start_say_why() -> None:
    answer = search(QueueTwin(starts=False), WORKLOAD, SLO)
    assert answer.limit is Limit.NO_START and answer.failure == "KV cache too small"
    assert "will NOT start" in answer.summary()


def test_slos_the_twin_does_not_predict_are_refused() -> None:
    with pytest.raises(CapacityError, match="p99_itl_ms"):
        search(QueueTwin(), WORKLOAD, SloLimits(limits={"p99_itl_ms": 50.0}))
    with pytest.raises(CapacityError, match="at least one SLO"):
        search(QueueTwin(), WORKLOAD, SloLimits())


def test_the_stated_interval_is_each_slo_metrics_own() -> None:
    def interval(metric: TwinMetric, pct: float) -> MetricInterval:
        return MetricInterval(metric=metric, interval_pct=pct, median_pct=pct, worst_pct=pct)

    validated = Prediction(
        profile="p r1",
        error_pct=12.0,
        error_source=ErrorSource.VALIDATION,
        starts=True,
        intervals=(interval(TwinMetric.P99_TTFT, 22.0), interval(TwinMetric.P99_E2EL, 9.0)),
    )
    assert stated_interval(validated, "p99_ttft_ms") == 22.0
    assert stated_interval(validated, "p99_e2el_ms") == 9.0
    assert stated_interval(validated, "p99_itl_ms") is None  # not validated: no interval
    assert stated_interval(validated, "p50_ttft_ms") is None  # not a metric the twin scores
    fit_only = validated.model_copy(update={"error_source": ErrorSource.FIT})
    assert stated_interval(fit_only, "p99_ttft_ms") is None
    unknown = Prediction(
        profile="p r1", error_pct=math.nan, error_source=ErrorSource.UNFITTED, starts=True
    )
    assert stated_interval(unknown, "p99_ttft_ms") is None


def test_on_the_twin_of_a_profile_the_rate_found_meets_the_slo_and_more_misses_it(
    tmp_path: Path,
) -> None:
    profile = cpu_profile(tmp_path)
    load = LoadSpec(input_len=128, output_len=32, num_prompts=100)
    slo = SloLimits(limits={"p99_ttft_ms": 30.0})
    answer = twin_capacity(profile, profile.flags, load, slo)
    assert answer.limit is Limit.SLO and answer.predictions <= MOST_PREDICTIONS
    assert answer.label.startswith("predicted (twin tiny-cpu r1")
    first = predict(profile, profile.flags, load)
    assert answer.error_pct == first.interval(TwinMetric.P99_TTFT)
    at = predict(
        profile,
        profile.flags,
        load.model_copy(update={"request_rate": answer.max_rate, "max_concurrency": None}),
    )
    above = predict(
        profile,
        profile.flags,
        load.model_copy(update={"request_rate": answer.max_rate * 1.3, "max_concurrency": None}),
    )
    assert at.p99_ttft_ms is not None and at.p99_ttft_ms <= 30.0
    assert above.p99_ttft_ms is not None and above.p99_ttft_ms > 30.0
    assert answer.low <= answer.max_rate <= answer.high
