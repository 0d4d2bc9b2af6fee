"""A lane on the simulator's virtual clock: no server, no sleeping, the same cost model.

``tui.sim.whatif`` runs ``vtc-sim serve``'s configuration checks, memory plan, scheduler
and cost model on a virtual clock, so a benchmark of a few hundred requests takes well
under a second. This lane turns its per-request times into ``vllm bench serve``'s numbers
with the load room's own statistics (``tui.load.report.build_result``), and a refused start
into the diagnosis the console would show (``tui.server.diagnose`` on vLLM's message). It
is the proving ground of ``benchmarks/sweep_efficiency.py`` and of fast strategy tests;
the product's sweeps run real servers (the simulator itself in ``--demo``).

Not modelled here: a concurrency cap (the workload's ``max_concurrency`` must be unset),
the range ratio of prompt lengths, burstiness other than Poisson, a prefix cache kept
between benchmarks (each benchmark starts cold, as after ``/reset_prefix_cache``). With a
twin profile among the simulator's arguments (``--sim-profile NAME|FILE``) the lane runs the
twin of that server (:mod:`tui.sim.twin_load`), which models the concurrency cap, the range
ratio and gamma arrivals as well.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Mapping, Sequence

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import BenchResult, SweepTag
from tui.domain.workload import LoadSpec
from tui.load.report import build_result
from tui.load.stats import RequestRecord
from tui.server.diagnose import diagnose
from tui.sim.twin_load import LoadShape
from tui.sim.whatif import Outcome, Scenario, ScenarioError, Workload
from tui.tune.lanes import BenchRun, LaneError, StartResult

Cache = dict[tuple[object, ...], object]


class WhatIfLane:
    """Trials on the virtual clock of one simulated GPU (``sim_args``: ``--sim-gpu`` ...)."""

    def __init__(
        self, sim_args: Sequence[str], *, name: str = "whatif", cache: Cache | None = None
    ):
        self._sim_args = list(sim_args)
        self._name = name
        self._cache: Cache = cache if cache is not None else {}
        self._scenario: Scenario | None = None
        self._argv: tuple[str, ...] = ()
        self.starts = 0
        self.benches = 0

    @property
    def name(self) -> str:
        """The lane's name."""
        return self._name

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        """The configuration checks and memory plan of ``vtc-sim serve``."""
        self.starts += 1
        self._argv = (*flags.to_argv(), *self._sim_args)
        key = ("start", self._argv)
        found = self._cache.get(key)
        if found is None:
            found = await asyncio.to_thread(_start, self._argv)
            self._cache[key] = found
        if isinstance(found, Scenario):
            self._scenario = found
            return StartResult(
                ok=True, kv_tokens=found.config.num_gpu_blocks * found.config.block_size
            )
        self._scenario = None
        text = str(found)
        diagnosis = diagnose(text, flags=flags)
        return StartResult(ok=False, diagnosis=diagnosis.summary, diagnosis_kind=diagnosis.kind)

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """``load`` served on the virtual clock; bench serve's numbers."""
        if self._scenario is None:
            raise LaneError("no server is up")
        if self._scenario.profile is not None:
            return await self._twin_bench(self._scenario, load, goodput)
        if load.max_concurrency is not None and load.max_concurrency < load.num_prompts:
            raise LaneError("the what-if lane models no concurrency cap: unset max_concurrency")
        self.benches += 1
        rate = None if math.isinf(load.request_rate) else load.request_rate
        workload = Workload(
            num_requests=load.num_prompts,
            input_len=load.input_len,
            output_len=load.output_len,
            prefix_len=load.prefix_len,
            rate=rate,
            adapters=(model,) if model else (),
            seed=load.seed,
        )
        key = ("bench", self._argv, workload, tuple(sorted(goodput.items())))
        found = self._cache.get(key)
        if found is None:
            found = await asyncio.to_thread(_bench, self._scenario, workload, dict(goodput))
            self._cache[key] = found
        assert isinstance(found, BenchRun)
        return found

    async def _twin_bench(
        self, scenario: Scenario, load: LoadSpec, goodput: Mapping[str, float]
    ) -> BenchRun:
        """``load`` on the twin of the scenario's profile (a concurrency cap included)."""
        self.benches += 1
        key = ("twin-bench", self._argv, load.model_dump_json(), tuple(sorted(goodput.items())))
        found = self._cache.get(key)
        if found is None:
            found = await asyncio.to_thread(_twin_bench, scenario, load, dict(goodput))
            self._cache[key] = found
        assert isinstance(found, BenchRun)
        return found

    async def reset_prefix_cache(self) -> bool:
        """Every what-if benchmark starts with an empty cache."""
        return True

    async def abort(self) -> None:
        """Nothing to cut short: each call returns in well under a second."""

    async def release(self) -> None:
        """Nothing held between trials."""


def _start(argv: tuple[str, ...]) -> Scenario | str:
    try:
        return Scenario.from_argv(list(argv))
    except ScenarioError as exc:
        return str(exc)


def _bench(scenario: Scenario, workload: Workload, goodput: dict[str, float]) -> BenchRun:
    outcome = scenario.run(workload)
    return BenchRun(result_of(outcome, workload, goodput), 100.0 * outcome.prefix_hit_rate)


def _twin_bench(scenario: Scenario, load: LoadSpec, goodput: dict[str, float]) -> BenchRun:
    assert scenario.profile is not None
    sim = scenario.twin_load(scenario.profile, LoadShape.of(load))
    outcome = Outcome(sim, scenario.config)
    result = run_result(outcome, load.request_rate, goodput, load.max_concurrency)
    return BenchRun(result, 100.0 * outcome.prefix_hit_rate)


def result_of(outcome: Outcome, workload: Workload, goodput: Mapping[str, float]) -> BenchResult:
    """bench serve's result for a what-if run (failed: requests that never got a token)."""
    rate = math.inf if workload.rate is None else workload.rate
    return run_result(outcome, rate, goodput)


def run_result(
    outcome: Outcome,
    rate: float,
    goodput: Mapping[str, float],
    max_concurrency: int | None = None,
) -> BenchResult:
    """bench serve's result for a virtual-clock run (failed: never got a token)."""
    records = []
    end = 0.0
    for r in outcome.result.requests:
        if r.first_token is None or r.finished_at is None:
            records.append(RequestRecord(success=False, error="not served", start_time=r.arrival))
            continue
        times = r.token_times
        records.append(
            RequestRecord(
                success=True,
                prompt_len=len(r.prompt_ids),
                output_tokens=len(r.output_ids),
                ttft=r.first_token - r.arrival,
                itl=[b - a for a, b in itertools.pairwise(times)],
                latency=r.finished_at - r.arrival,
                start_time=r.arrival,
            )
        )
        end = max(end, r.finished_at)
    return build_result(
        records, end, goodput=goodput or None, request_rate=rate, max_concurrency=max_concurrency
    )
