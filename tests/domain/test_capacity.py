"""Capacity's records and decisions: replicas, the real loads --confirm asks for and their
size, the JSON."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.domain.capacity import (
    ABOVE,
    LEAST_PROMPTS,
    MOST_REAL_LOADS,
    CapacityAnswer,
    CurvePoint,
    Limit,
    RealLoad,
    next_confirm_rate,
    replicas_for,
    sized_load,
    sized_prompts,
)
from tui.domain.sweep.slo import SloLimits
from tui.domain.workload import LoadSpec

SLO = SloLimits(limits={"p99_ttft_ms": 500.0})


def _answer(**update: object) -> CapacityAnswer:
    # a curve whose p99 TTFT doubles every 2 req/s: 125 ms at 0, 500 at 4, 1000 at 6
    curve = [CurvePoint(rate=r, stats={"p99_ttft_ms": 125.0 * 2 ** (r / 2)}) for r in range(9)]
    base = CapacityAnswer(
        label="predicted (twin t r1, ±10% validation)",
        slos=SLO,
        workload=LoadSpec(num_prompts=100),
        limit=Limit.SLO,
        max_rate=4.0,
        low=3.7,
        high=4.3,
        saturation=8.0,
        error_pct=10.0,
        curve=curve,
    )
    return base.model_copy(update=update)


def _load(rate: float, ttft: float) -> RealLoad:
    return RealLoad(rate=rate, stats={"p99_ttft_ms": ttft}, met=ttft <= 500.0)


def test_replicas_round_up_and_span_the_interval() -> None:
    r = replicas_for(40.0, 4.2, 3.8, 4.6)
    assert (r.needed, r.low, r.high) == (10, 9, 11)
    exact = replicas_for(40.0, 4.0, 4.0, 4.0)
    assert exact.needed == 10  # 40 / 4 is 10 replicas, not 11
    assert replicas_for(40.0, 0.0, 0.0, 1.0).needed is None


def test_confirming_starts_at_the_prediction_then_above_it_and_stops_when_they_agree() -> None:
    answer = _answer()
    assert next_confirm_rate(answer) == 4.0
    answer = answer.model_copy(update={"real_loads": [_load(4.0, 480.0)]})
    assert next_confirm_rate(answer) == pytest.approx(4.0 * ABOVE)
    answer = answer.model_copy(update={"real_loads": [*answer.real_loads, _load(5.2, 900.0)]})
    assert next_confirm_rate(answer) is None
    assert answer.confirmed_rate == 4.0
    assert answer.verdict().startswith("confirmed")


def test_a_server_slower_than_the_twin_gets_a_third_load_below_the_prediction() -> None:
    # measured twice the twin's latency at 4 req/s: the scaled curve crosses 500 ms at 2
    answer = _answer(real_loads=[_load(4.0, 1000.0), _load(5.2, 2000.0)])
    rate = next_confirm_rate(answer)
    assert rate is not None and rate == pytest.approx(2.0, rel=0.1)
    answer = answer.model_copy(update={"real_loads": [*answer.real_loads, _load(rate, 450.0)]})
    assert next_confirm_rate(answer) is None  # at most three
    assert len(answer.real_loads) == MOST_REAL_LOADS
    assert answer.confirmed_rate == rate
    assert answer.verdict().startswith("corrected")


def test_a_server_faster_than_the_twin_gets_a_third_load_above() -> None:
    answer = _answer(real_loads=[_load(4.0, 250.0), _load(5.2, 400.0)])
    rate = next_confirm_rate(answer)
    assert rate is not None and rate > 5.2


def test_no_load_when_no_rate_holds() -> None:
    assert next_confirm_rate(_answer(max_rate=0.0, limit=Limit.UNMET)) is None


def test_the_json_has_the_keys_scripts_rely_on() -> None:
    answer = _answer(
        replicas=replicas_for(40.0, 4.0, 3.7, 4.3),
        real_loads=[
            _load(4.0, 480.0),
            RealLoad(rate=5.2, stats={"p99_ttft_ms": math.inf}, met=False),
        ],
    )
    data = answer.to_json()
    assert data["max_rate"] == 4.0 and data["interval"] == [3.7, 4.3]
    assert data["replicas"]["needed"] == 10  # type: ignore[index]
    curve = data["curve"]
    assert isinstance(curve, list) and curve[0] == {"rate": 0, "p99_ttft_ms": 125.0}
    assert data["confirmed_rate"] == 4.0
    loads = data["real_loads"]
    assert isinstance(loads, list) and loads[1]["p99_ttft_ms"] is None  # not measured: null


def test_the_ratio_reads_every_slo_and_an_interval_edge() -> None:
    point = CurvePoint(rate=1.0, stats={"p99_ttft_ms": 250.0, "p99_e2el_ms": 900.0})
    slos = SloLimits(limits={"p99_ttft_ms": 500.0, "p99_e2el_ms": 1000.0})
    assert point.ratio(slos) == pytest.approx(0.9)
    assert point.ratio(slos, 1.2) == pytest.approx(1.08)
    assert CurvePoint(rate=1.0).ratio(slos) == math.inf


@pytest.mark.parametrize(
    ("rate", "seconds", "most", "want"),
    [
        (0.5, 60.0, 100, 30),  # rate x seconds
        (0.05, 60.0, 100, LEAST_PROMPTS),  # 3 requests would say nothing of a p99
        (40.0, 120.0, 200, 200),  # a fast server: the workload's whole count
        (0.5, 60.0, 12, 12),  # a workload smaller than the floor keeps its own count
        (math.inf, 60.0, 100, 100),  # no rate paces it: the whole count
        (0.5, None, 100, 100),  # no time given: unbounded, as before
    ],
)
def test_a_load_sends_its_rate_times_its_seconds_within_the_floor_and_the_workload(
    rate: float, seconds: float | None, most: int, want: int
) -> None:
    assert sized_prompts(rate, seconds, most) == want


@settings(max_examples=examples(200))
@given(
    rates=st.lists(st.floats(1e-3, 1e3), min_size=2, max_size=2).map(sorted),
    seconds=st.floats(1.0, 3600.0),
    most=st.integers(1, 5000),
)
def test_a_sized_load_never_grows_and_grows_with_its_rate(
    rates: list[float], seconds: float, most: int
) -> None:
    low, high = (sized_prompts(r, seconds, most) for r in rates)
    assert min(LEAST_PROMPTS, most) <= low <= high <= most
    if low > LEAST_PROMPTS and low < most:  # neither bound: it lasts about ``seconds``
        assert abs(low / rates[0] - seconds) <= 0.5 / rates[0] + 1e-9


def test_the_answer_sizes_each_rate_s_load_and_says_how() -> None:
    answer = _answer(load_seconds=30.0)
    assert answer.load_at(2.0).num_prompts == 60
    assert answer.load_at(2.0).request_rate == 2.0
    assert answer.load_at(0.1).num_prompts == LEAST_PROMPTS
    assert answer.load_at(math.inf).num_prompts == 100
    assert answer.sizing() == f"rate x 30 s requests per load ({LEAST_PROMPTS}-100)"
    assert answer.to_json()["load_seconds"] == 30.0
    unbounded = _answer()
    assert unbounded.load_at(2.0).num_prompts == 100 and unbounded.sizing() == (
        "100 requests per load"
    )
    assert sized_load(LoadSpec(num_prompts=80), 1.0, 45.0).num_prompts == 45
