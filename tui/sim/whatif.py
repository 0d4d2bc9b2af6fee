"""What a ``vtc-sim serve`` command line would do with a workload, on a virtual clock.

The same configuration checks, memory plan, scheduler and cost model as a running
simulator (:func:`tui.sim.startup.check_command`, :func:`tui.sim.scheduler.simulate`), with
no sockets and no sleeping: a few thousand requests take well under a second. Tests use it
to show each effect of the cost model moving the right way; the numbers are simulated
seconds (``--sim-speed`` does not apply).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tui.domain.profile import Profile
from tui.sim.argv import parse_command
from tui.sim.costmodel import CostModel
from tui.sim.scheduler import SchedulerConfig, SimRequest, SimulationResult, simulate
from tui.sim.startup import check_command
from tui.sim.twin import TwinCost
from tui.sim.twin_load import LoadShape, run_twin_load


class ScenarioError(ValueError):
    """The command line would not start a server (the message is vLLM's)."""


@dataclass(frozen=True)
class Workload:
    """Requests like ``vllm bench serve``'s random dataset, with a shared prefix option.

    ``rate`` is requests per second (Poisson arrivals); ``None`` sends everything at 0
    (``--request-rate inf``). ``adapters`` spreads requests round-robin over LoRA adapter
    names (empty: the base model).
    """

    num_requests: int = 200
    input_len: int = 512
    output_len: int = 128
    prefix_len: int = 0
    rate: float | None = None
    adapters: tuple[str, ...] = ()
    seed: int = 0

    def requests(self, vocab: int = 32000) -> list[SimRequest]:
        """Fresh requests (each run needs its own: the scheduler mutates them)."""
        rng = random.Random(self.seed)
        prefix = [rng.randrange(1000, vocab) for _ in range(self.prefix_len)]
        t = 0.0
        out = []
        for i in range(self.num_requests):
            if self.rate is not None:
                t += rng.expovariate(self.rate)
            body = [rng.randrange(1000, vocab) for _ in range(self.input_len)]
            adapter = self.adapters[i % len(self.adapters)] if self.adapters else None
            out.append(
                SimRequest(
                    request_id=f"r{i}",
                    prompt_ids=prefix + body,
                    max_tokens=self.output_len,
                    arrival=t,
                    lora=adapter,
                )
            )
        return out


@dataclass(frozen=True)
class Outcome:
    """What ``vllm bench serve`` would report for one run, in simulated seconds."""

    result: SimulationResult
    config: SchedulerConfig

    @property
    def requests(self) -> list[SimRequest]:
        """The finished requests."""
        return [r for r in self.result.requests if r.first_token is not None]

    def ttft(self) -> list[float]:
        """Time to first token of each request."""
        return [r.first_token - r.arrival for r in self.requests if r.first_token is not None]

    def itl(self) -> list[float]:
        """Every inter-token gap of every request (bench serve pools them)."""
        gaps: list[float] = []
        for r in self.requests:
            gaps.extend(b - a for a, b in zip(r.token_times, r.token_times[1:], strict=False))
        return gaps

    def e2e(self) -> list[float]:
        """Arrival to last token of each request."""
        return [r.finished_at - r.arrival for r in self.requests if r.finished_at is not None]

    @staticmethod
    def pct(values: Sequence[float], p: float) -> float:
        """``np.percentile`` as bench serve computes it (0 for no values)."""
        return float(np.percentile(values, p)) if values else 0.0

    @property
    def output_throughput(self) -> float:
        """Generated tokens per simulated second."""
        return self.result.output_throughput

    @property
    def prefix_hit_rate(self) -> float:
        """Prefix-cache hits over queries, 0-1."""
        q = self.result.prefix_queries
        return self.result.prefix_hits / q if q else 0.0


@dataclass(frozen=True)
class Scenario:
    """A command line's scheduler limits and cost model."""

    config: SchedulerConfig
    cost: CostModel
    profile: Profile | None = None  # --sim-profile: the twin's step times and overheads

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> Scenario:
        """``MODEL [vllm flags] [--sim-*]`` as ``vtc-sim serve`` would start it."""
        command = parse_command(list(argv))
        checked = check_command(command)
        if checked.error is not None:
            raise ScenarioError("\n".join(checked.error.lines(checked.model)))
        plan, cfg = checked.plan, checked.cfg
        assert plan is not None and cfg is not None
        if plan.failure is not None:
            raise ScenarioError(f"{plan.failure.exc_type}: {plan.failure.message}")
        assert plan.capacity is not None
        lora = command.frontend.lora
        config = SchedulerConfig.of(
            cfg,
            num_gpu_blocks=plan.capacity.num_blocks,
            max_model_len=plan.max_model_len,
            max_loras=lora.max_loras if lora.enabled else 0,
        )
        cost = CostModel.from_plan(plan, lora.max_lora_rank if lora.enabled else None)
        profile = command.sim.profile
        if profile is not None:
            cost = TwinCost.of(cost, profile)
        return cls(config, cost, profile)

    def run(self, workload: Workload) -> Outcome:
        """Serve ``workload`` to completion on the virtual clock."""
        if self.profile is not None:
            return Outcome(self._twin_run(self.profile, workload), self.config)
        return Outcome(simulate(self.config, self.cost, workload.requests()), self.config)

    def _twin_run(self, profile: Profile, workload: Workload) -> SimulationResult:
        """The twin's run: request overheads and the concurrency-free arrivals of ``workload``."""
        shape = LoadShape(
            num_prompts=workload.num_requests,
            input_len=workload.input_len,
            output_len=workload.output_len,
            prefix_len=workload.prefix_len,
            request_rate=math.inf if workload.rate is None else workload.rate,
            seed=workload.seed,
        )
        return self.twin_load(profile, shape)

    def twin_load(self, profile: Profile, shape: LoadShape) -> SimulationResult:
        """``shape`` (a concurrency cap included) on the twin of ``profile``."""
        trace = run_twin_load(
            self.config, profile.coefficients, shape, blocking=profile.frontend_blocks
        )
        return SimulationResult(
            duration=trace.end,
            requests=[t.request for t in trace.requests],
            steps=len(trace.steps),
            num_preemptions=trace.num_preemptions,
            prefix_queries=trace.prefix_queries,
            prefix_hits=trace.prefix_hits,
        )


def run_argv(argv: Sequence[str], workload: Workload) -> Outcome:
    """:meth:`Scenario.from_argv` then :meth:`Scenario.run`."""
    return Scenario.from_argv(argv).run(workload)
