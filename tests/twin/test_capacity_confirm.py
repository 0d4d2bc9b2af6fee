"""--confirm: at most three real loads, each kept as a run, on a fake server of known capacity."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from fakes.capacity_twin import QueueTwin

from tui.domain.capacity import ABOVE, MOST_REAL_LOADS, CapacityAnswer, RealLoad
from tui.domain.results import BenchResult, RunRecord
from tui.domain.sweep.slo import SloLimits
from tui.domain.workload import LoadSpec
from tui.twin.capacity import search
from tui.twin.confirm import confirm

SLO = SloLimits(limits={"p99_ttft_ms": 500.0})


class QueueServer:
    """A "real" server: the queue with its own unloaded latency; each load a run."""

    def __init__(self, base_ms: float, throughput: float = 10.0) -> None:
        self.queue = QueueTwin(base_ms=base_ms, throughput=throughput)
        self.runs: list[RunRecord] = []
        self.loads: list[LoadSpec] = []

    async def run_load(
        self,
        spec: LoadSpec,
        model: str | None = None,
        goodput: Mapping[str, float] | None = None,
    ) -> BenchResult | None:
        self.loads.append(spec)
        ttft = self.queue.latency(spec.request_rate)
        result = BenchResult(
            completed=spec.num_prompts,
            request_throughput=min(spec.request_rate, self.queue.throughput),
            stats={"p99_ttft_ms": ttft},
        )
        self.runs.append(
            RunRecord.model_validate(
                {"id": 100 + len(self.runs), "flags": {"model": "m"}, "bench": result.model_dump()}
            )
        )
        return result


def _confirmed(base_ms: float, throughput: float = 10.0) -> tuple[CapacityAnswer, QueueServer]:
    answer = search(QueueTwin(base_ms=100.0), LoadSpec(num_prompts=50), SLO)
    server = QueueServer(base_ms, throughput)
    seen: list[RealLoad] = []
    final = asyncio.run(confirm(answer, server, on_load=seen.append))
    assert seen == final.real_loads
    return final, server


def test_a_server_as_the_twin_says_is_confirmed_in_two_loads() -> None:
    answer, server = _confirmed(100.0)
    rates = [s.request_rate for s in server.loads]
    assert len(rates) == 2
    assert rates[1] == pytest.approx(rates[0] * ABOVE, rel=1e-3)
    assert answer.real_loads[0].met and not answer.real_loads[1].met
    assert answer.confirmed_rate == answer.real_loads[0].rate
    assert [r.run_id for r in answer.real_loads] == [100, 101]  # each load is a run
    assert all(s.max_concurrency is None for s in server.loads)  # arrivals, not slots
    assert answer.verdict().startswith("confirmed")


def test_a_server_within_the_step_above_is_confirmed() -> None:
    answer, _ = _confirmed(60.0)  # holds 8.8 req/s: met at 8, missed at 10.4 as predicted
    assert answer.verdict().startswith("confirmed")


@pytest.mark.parametrize(("base_ms", "throughput"), [(170.0, 10.0), (100.0, 14.0)])
def test_a_server_off_the_twin_is_corrected_in_at_most_three(
    base_ms: float, throughput: float
) -> None:
    answer, server = _confirmed(base_ms, throughput)
    assert len(server.loads) == MOST_REAL_LOADS
    assert len(server.loads) <= MOST_REAL_LOADS
    truth = server.queue.max_rate(500.0)
    confirmed = answer.confirmed_rate
    assert confirmed is not None and confirmed <= truth + 1e-9  # only what was measured to hold
    assert answer.verdict().startswith("corrected")


def test_on_a_slow_server_each_real_load_is_sized_by_its_rate_as_the_twin_s() -> None:
    # 1 req/s at most: 200 requests at 0.8 req/s would be a 4-minute load; 30 s each here
    answer = search(
        QueueTwin(throughput=1.0, base_ms=100.0), LoadSpec(num_prompts=200), SLO, load_seconds=30.0
    )
    server = QueueServer(100.0, throughput=1.0)
    final = asyncio.run(confirm(answer, server))
    assert len(server.loads) == 2
    for spec, load in zip(server.loads, final.real_loads, strict=True):
        assert spec.num_prompts == answer.load_at(spec.request_rate).num_prompts
        assert spec.num_prompts == max(20, round(spec.request_rate * 30.0))
        assert load.requests == spec.num_prompts  # said with the load
        assert spec.num_warmups == 1 and spec.max_concurrency is None
    assert final.to_json()["real_loads"][0]["requests"] == server.loads[0].num_prompts


def test_without_a_time_per_load_every_real_load_sends_the_workload() -> None:
    _, server = _confirmed(100.0)
    assert {s.num_prompts for s in server.loads} == {50}
