"""A calibration on a slow server: every family and both passes within the budget, on a
clock the test keeps (each load takes what a compute-bound CPU server would take)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

import tui.twin.calibrate as calibrate_module
from tui.domain.calibration import JournalLine, Progress, design
from tui.domain.flags.serve import ServeFlags
from tui.domain.profile import FitSample
from tui.domain.results import BenchResult
from tui.domain.workload import LoadProgress, LoadSpec
from tui.twin.calibrate import Calibration, _append, journal_path

FLAGS = ServeFlags(model="m")
MODELS = json.dumps({"data": [{"id": "m", "root": "m", "max_model_len": 4096}]})
BUDGET_S = 300.0


def slow_cpu(load: LoadSpec) -> float:
    """A compute-bound CPU server's seconds for a load: a prompt token ~11 ms with the
    attention pairs on top, an engine step ~12 ms, a streamed token ~11 ms."""
    n = load.num_prompts + load.num_warmups
    conc = min(load.max_concurrency or n, n)
    steps = (math.ceil(load.num_prompts / conc) + load.num_warmups) * load.output_len
    prompt = n * load.input_len + load.prefix_len
    return (
        0.011 * prompt
        + 1.5e-6 * n * load.input_len**2 / 2
        + 0.012 * steps
        + 0.011 * n * (load.output_len)
    )


@dataclass
class Clock:
    """The calibration's clock: moved by the loads alone."""

    now: float = 0.0

    def monotonic(self) -> float:
        return self.now


@dataclass
class SlowRunner:
    """Each load takes :func:`slow_cpu`'s seconds on the clock, and completes."""

    clock: Clock
    specs: list[LoadSpec] = field(default_factory=list)

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        on_progress: Callable[[LoadProgress], None] | None = None,
    ) -> BenchResult:
        self.specs.append(spec)
        self.clock.now += slow_cpu(spec)
        return BenchResult(completed=spec.num_prompts, output_throughput=100.0)

    async def cancel(self) -> None:
        """Nothing runs in between."""


@dataclass
class PagesTarget:
    """A server answering fixed pages (an httpx mock transport)."""

    flags: ServeFlags = FLAGS
    base_url: str = "http://server"

    def client(self) -> httpx.AsyncClient:
        pages = {"/v1/models": MODELS, "/version": '{"version": "0.32.0"}'}

        def answer(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, text=pages.get(request.url.path, ""))

        return httpx.AsyncClient(transport=httpx.MockTransport(answer))

    def log_text(self) -> str:
        return ""


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(
        calibrate_module, "time", SimpleNamespace(monotonic=clock.monotonic, time=time.time)
    )
    # The fit is the twin's (tested on its own): here, what it would be given.
    monkeypatch.setattr(Calibration, "_fit", lambda self, facts, samples, started: samples)
    return clock


async def _calibrate(clock: Clock, data: Path) -> tuple[list[FitSample], list[Progress], Clock]:
    runner = SlowRunner(clock)
    seen: list[Progress] = []
    run = Calibration(
        name="slow",
        target=PagesTarget(),
        loads=design(4096, passes=2),
        data_dir=data,
        budget_s=BUDGET_S,
        runner=lambda: runner,
    )
    samples = await run.run(seen.append)
    return samples, seen, clock  # type: ignore[return-value]  # _fit gives back the samples


async def test_every_family_and_both_passes_complete_within_the_budget(
    clock: Clock, tmp_path: Path
) -> None:
    loads = design(4096, passes=2)
    assert sum(slow_cpu(d.load) for d in loads) > 4 * BUDGET_S  # as drawn: far too long
    samples, seen, clock = await _calibrate(clock, tmp_path)
    assert [s.name for s in samples] == [d.name for d in loads]
    assert clock.now <= BUDGET_S
    runs = {s.name: s.load for s in samples}
    for d in loads[9:]:  # the second pass repeats the first's sizes, other prompts
        first = runs[d.family]
        assert runs[d.name] == first.model_copy(update={"seed": runs[d.name].seed})
        assert runs[d.name].seed != first.seed
    # The progress line's ETA: estimating until the probes have run, then the estimate of
    # the loads left, within a fifth of the time they took.
    starts = [p for p in seen if p.current != "fitting"]
    first_of_each: dict[int, Progress] = {}
    for p in starts:
        first_of_each.setdefault(p.done, p)
    assert [first_of_each[k].eta_s for k in range(3)] == [None, None, None]
    for k in range(3, len(loads)):
        p = first_of_each[k]
        actual = clock.now - p.elapsed_s
        assert p.eta_s is not None and abs(p.eta_s - actual) <= 0.2 * actual + 2.0
    assert seen[-1].current == "fitting" and seen[-1].done == len(loads)


async def test_a_resumed_calibration_sizes_the_rest_from_the_journal(
    clock: Clock, tmp_path: Path
) -> None:
    loads = design(4096, passes=2)
    path = journal_path(tmp_path, "slow")
    # An earlier run finished the probes and the first long-prompt load, at these sizes.
    for d in loads[:4]:
        load = d.load.model_copy(update={"num_prompts": d.least})
        sample = FitSample(name=d.name, flags=FLAGS, load=load, result=BenchResult(completed=2))
        _append(path, JournalLine(name=d.name, sample=sample, seconds=slow_cpu(load)))
    samples, _, clock = await _calibrate(clock, tmp_path)
    assert [s.name for s in samples] == [d.name for d in loads]
    assert clock.now <= BUDGET_S
    runs = {s.name: s.load for s in samples}
    # Its second pass as the journal ran it (full-length prompts), the rest sized around it.
    assert runs["prefill-c1#2"].input_len == loads[3].load.input_len
    assert runs["prefill-c1#2"].num_prompts == loads[3].least
    assert runs["prefill-c4"].input_len < loads[3].load.input_len
