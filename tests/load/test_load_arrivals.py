"""Arrival times (ref section 4.3)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tui.load.arrivals import open_ended_times, send_times


def test_infinite_rate_sends_everything_at_zero() -> None:
    assert send_times(5, math.inf, 1.0, seed=3) == [0.0] * 5


def test_infinite_burstiness_gives_constant_gaps() -> None:
    times = send_times(4, 2.0, math.inf)
    # gaps of 1/2 s, the first one included: 0.5, 1.0, 1.5, 2.0
    assert times == pytest.approx([0.5, 1.0, 1.5, 2.0])


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_right_mean_and_spread(burstiness: float) -> None:
    n, rate = 20_000, 10.0
    times = send_times(n, rate, burstiness, seed=7)
    gaps = np.diff([0.0, *times])
    assert times[-1] == pytest.approx(n / rate, rel=1e-12)  # rescaled: last at N/rate
    assert float(np.mean(gaps)) == pytest.approx(1.0 / rate, rel=1e-9)
    cv = float(np.std(gaps) / np.mean(gaps))
    assert cv == pytest.approx(1.0 / math.sqrt(burstiness), rel=0.1)
    assert all(b >= a for a, b in itertools.pairwise(times))


def test_seeded_and_reproducible() -> None:
    assert send_times(50, 5.0, 1.0, seed=1) == send_times(50, 5.0, 1.0, seed=1)
    assert send_times(50, 5.0, 1.0, seed=1) != send_times(50, 5.0, 1.0, seed=2)


def test_same_schedule_as_bench_serve_global_generator() -> None:
    # bench serve: np.random.seed(seed), then np.random.gamma per request, accumulated
    # and rescaled to N/rate (serve.py:475-497). Done here by hand on the global state.
    saved = np.random.get_state()
    try:
        np.random.seed(11)
        gaps = [np.random.gamma(shape=2.0, scale=1.0 / (3.0 * 2.0)) for _ in range(6)]
    finally:
        np.random.set_state(saved)
    acc = list(np.cumsum(gaps))
    expected = [d * (6 / 3.0) / acc[-1] for d in acc]
    assert send_times(6, 3.0, 2.0, seed=11) == pytest.approx(expected, rel=1e-12)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="num_requests"):
        send_times(0, 1.0)
    with pytest.raises(ValueError, match="request_rate"):
        send_times(3, 0.0)
    with pytest.raises(ValueError, match="burstiness"):
        send_times(3, 1.0, 0.0)


@pytest.mark.parametrize("burstiness", [0.5, 1.0, 3.0])
def test_open_ended_times_keep_rate_and_burstiness(burstiness: float) -> None:
    n, rate = 20_000, 8.0
    times = list(itertools.islice(open_ended_times(rate, burstiness, seed=4), n))
    gaps = np.diff([0.0, *times])
    # Not rescaled: the mean gap is 1/rate only within sampling error.
    assert float(np.mean(gaps)) == pytest.approx(1.0 / rate, rel=0.03)
    cv = float(np.std(gaps) / np.mean(gaps))
    assert cv == pytest.approx(1.0 / math.sqrt(burstiness), rel=0.1)
    assert all(b > a for a, b in itertools.pairwise(times))


def test_open_ended_times_match_the_gaps_of_send_times() -> None:
    # Same seeded generator, same gaps; send_times then rescales to end at N/rate.
    head = list(itertools.islice(open_ended_times(3.0, 2.0, seed=11), 6))
    fixed = send_times(6, 3.0, 2.0, seed=11)
    factor = fixed[-1] / head[-1]
    assert [t * factor for t in head] == pytest.approx(fixed, rel=1e-12)
    constant = list(itertools.islice(open_ended_times(4.0, math.inf), 3))
    assert constant == pytest.approx([0.25, 0.5, 0.75])


def test_open_ended_times_refuse_an_infinite_rate() -> None:
    with pytest.raises(ValueError, match="finite"):
        next(open_ended_times(math.inf))
    with pytest.raises(ValueError, match="burstiness"):
        next(open_ended_times(1.0, 0.0))
