"""benchmarks/capacity.py's sizing: every real load bounded in time, the sizes it prints."""

from __future__ import annotations

import math
from typing import cast

import pytest

from benchmarks._reference import SPREAD_LOAD, RepeatSpread
from benchmarks.capacity import (
    BISECT_STEPS,
    LOAD_SECONDS,
    MOST_PROMPTS,
    SPREAD_PROMPTS,
    STEPS_OUT,
    RealBench,
    bisection,
    guess_rate,
    load_line,
    parser,
    plan_line,
    saturated_prompts,
)
from tui.domain.capacity import ABOVE, LEAST_PROMPTS, sized_prompts
from tui.domain.sweep.outcome import Measurement, Phase
from tui.domain.sweep.slo import SloLimits, SloVerdict
from tui.domain.workload import LoadSpec
from tui.modes.calibrate import LaunchedTarget
from tui.tune.strategies.rates import FULL_RETREATS

WORKLOAD = LoadSpec(input_len=64, output_len=32, num_prompts=100, max_concurrency=None)


def test_the_saturated_rate_is_guessed_from_the_spread_by_tokens_per_request() -> None:
    # the spread's runs: 128 in / 64 out at 27.5 output tok/s = 0.43 req/s; 64 in / 32 out
    # is half the tokens a request, so about twice the rate
    spread = RepeatSpread({"output_throughput": [26.0, 27.5, 29.0]})
    guess = guess_rate(spread, SPREAD_LOAD, WORKLOAD)
    assert guess == pytest.approx(27.5 / 64 * 192 / 96)
    assert guess_rate(RepeatSpread({}), SPREAD_LOAD, WORKLOAD) is None
    assert guess_rate(RepeatSpread({"output_throughput": [0.0]}), SPREAD_LOAD, WORKLOAD) is None


@pytest.mark.parametrize(
    ("guess", "want"),
    [(0.86, 39), (0.1, LEAST_PROMPTS), (50.0, 100), (None, 100)],
)
def test_the_saturated_load_sends_what_the_guess_serves_in_the_load_time(
    guess: float | None, want: int
) -> None:
    assert saturated_prompts(guess, 45.0, 100) == want


def test_the_defaults_bound_every_load_of_the_reference_run() -> None:
    args = parser().parse_args([])
    assert (args.input_len, args.output_len) == (64, 32)
    assert (args.load_seconds, args.num_prompts) == (LOAD_SECONDS, MOST_PROMPTS)
    assert args.spread_prompts == SPREAD_PROMPTS
    # at the reference's guessed 0.86 req/s: the light load (a fifth) and a probe at half
    for rate in (0.86 / 5, 0.43, 0.86, 0.86 * 1.3):
        prompts = sized_prompts(rate, args.load_seconds, args.num_prompts)
        assert prompts >= LEAST_PROMPTS
        assert prompts / rate <= max(args.load_seconds, LEAST_PROMPTS / rate) + 1


def test_the_sizes_are_printed() -> None:
    line = plan_line(parser().parse_args([]))
    assert "64 in / 32 out" in line and "R x 45 s requests (20-100)" in line
    assert f"5 runs of {SPREAD_PROMPTS} requests" in line and "calibration budget 600 s" in line
    assert "profile mine" in plan_line(parser().parse_args(["--profile", "mine"]))
    at = WORKLOAD.model_copy(update={"request_rate": 0.5, "num_prompts": 23})
    assert load_line(at) == "23 requests at 0.5 req/s (~46 s of arrivals)"
    burst = WORKLOAD.model_copy(update={"request_rate": math.inf, "num_prompts": 39})
    assert load_line(burst) == "39 requests at once"


class _Server(RealBench):
    """A server that holds the SLO at every rate up to ``holds`` req/s, whatever a burst
    served: the finite load's case the burst-capped bisection could not see."""

    def __init__(self, holds: float) -> None:
        super().__init__(cast(LaunchedTarget, None), SloLimits(limits={"p99_ttft_ms": 1.0}), 45.0)
        self.holds = holds
        self.rates: list[float] = []

    async def reset_prefix_cache(self) -> None:
        return None

    async def measure(self, load: LoadSpec, phase: str) -> Measurement:
        self.loads += 1
        self.rates.append(load.request_rate)
        met = load.request_rate <= self.holds
        return Measurement(
            phase=Phase(phase),
            load=load,
            metrics={"request_throughput": min(load.request_rate, 0.9)},
            verdict=SloVerdict(met=met),
        )


def _burst(served: float) -> Measurement:
    burst = WORKLOAD.model_copy(update={"request_rate": math.inf, "num_prompts": 40})
    return Measurement(phase=Phase("saturated"), load=burst, metrics={"request_throughput": served})


@pytest.mark.parametrize("holds", [0.3, 0.5, 0.775, 1.15, 1.6])
async def test_the_real_bisection_looks_above_what_a_burst_served(holds: float) -> None:
    server = _Server(holds)
    real = await bisection(server, _burst(0.775), WORKLOAD)
    assert real.bounded
    # within 1/16 of the bracket (a 1.3x step) below what the server holds, never above
    assert holds * (1 - 0.3 / 16) - 1e-3 <= real.rate <= holds
    assert any(r > holds for r in server.rates)  # a miss bounded it
    assert server.loads <= STEPS_OUT + BISECT_STEPS + 1 + FULL_RETREATS


async def test_a_server_that_never_misses_gives_a_lower_bound_said_so() -> None:
    server = _Server(100.0)
    real = await bisection(server, _burst(0.775), WORKLOAD)
    assert not real.bounded
    assert real.rate == pytest.approx(0.775 * ABOVE ** (STEPS_OUT - 1), rel=1e-3)
    assert server.loads == STEPS_OUT
    nowhere = _Server(0.0)  # never met: no bracket either, and no rate claimed
    none = await bisection(nowhere, _burst(0.775), WORKLOAD)
    assert (none.rate, none.bounded) == (0.0, False)
