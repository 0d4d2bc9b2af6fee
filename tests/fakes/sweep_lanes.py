"""Scripted sweep lanes: starts and benchmarks decided by functions of the flags.

``ScriptedLane`` answers like a server whose capacity the test defines: ``fails(flags)``
returns a diagnosis kind when the start must fail; ``model(flags, load)`` returns the
request throughput the server sustains and the p99 E2EL it shows at ``load``. Every call
is recorded (starts, benchmarks with their rates, prefix-cache resets), so a test asserts
what a strategy asked for. ``gate`` (shared by several lanes) holds each start until that
many lanes are busy at once: parallel scheduling shown by events, not by timing.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import BenchResult, SweepTag
from tui.domain.workload import LoadSpec
from tui.tune.lanes import BenchRun, LaneInterrupted, LaneLost, StartResult

Model = Callable[[ServeFlags, LoadSpec], tuple[float, float]]


def saturating(capacity: float, base_e2el_ms: float = 1000.0) -> Model:
    """A server that sustains ``capacity`` req/s: below it latency is flat, above it the
    queue grows with the number of prompts (rate ``inf`` sends them all at once)."""

    def model(flags: ServeFlags, load: LoadSpec) -> tuple[float, float]:
        rate = load.request_rate
        if math.isinf(rate) or rate >= capacity:
            wait_s = load.num_prompts / capacity
            return capacity, base_e2el_ms + 1000.0 * wait_s
        return rate, base_e2el_ms * (1 + rate / capacity)

    return model


@dataclass
class Gate:
    """Holds starts until ``width`` lanes are busy at the same moment."""

    width: int
    busy: int = 0
    peak: int = 0
    event: asyncio.Event = field(default_factory=asyncio.Event)

    async def enter(self) -> None:
        """One more lane busy; wait (bounded) until ``width`` are."""
        self.busy += 1
        self.peak = max(self.peak, self.busy)
        if self.busy >= self.width:
            self.event.set()
        await asyncio.wait_for(self.event.wait(), 30)

    def leave(self) -> None:
        """One lane less busy."""
        self.busy -= 1


@dataclass
class ScriptedLane:
    """A lane whose servers follow ``fails`` and ``model``."""

    name: str = "fake"
    fails: Callable[[ServeFlags], str | None] = lambda flags: None
    model: Model = field(default_factory=lambda: saturating(10.0))
    gate: Gate | None = None
    interrupt_on_bench: int | None = None  # the Nth benchmark is cut short (a stop)
    lose_on_benches: tuple[int, ...] = ()  # these benchmarks die with their node (a cluster)
    starts: list[ServeFlags] = field(default_factory=list)
    tags: list[SweepTag] = field(default_factory=list)
    benches: list[tuple[ServeFlags, LoadSpec]] = field(default_factory=list)
    resets: int = 0
    aborted: int = 0
    released: int = 0
    _flags: ServeFlags | None = None

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        """Record the start; fail it when ``fails`` says so."""
        self.starts.append(flags)
        self.tags.append(tag)
        if self.gate is not None:
            await self.gate.enter()
            self.gate.leave()
        kind = self.fails(flags)
        if kind is not None:
            self._flags = None
            return StartResult(False, len(self.starts), f"scripted {kind}", kind)
        self._flags = flags
        return StartResult(True, len(self.starts), kv_tokens=1000)

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """bench serve's numbers from ``model``."""
        assert self._flags is not None, "benchmark without a server"
        self.benches.append((self._flags, load))
        if self.interrupt_on_bench is not None and len(self.benches) >= self.interrupt_on_bench:
            raise LaneInterrupted("the load was cancelled")
        if len(self.benches) in self.lose_on_benches:
            raise LaneLost(f"node {self.name} died mid-trial", node=self.name)
        throughput, e2el = self.model(self._flags, load)
        result = BenchResult(
            completed=load.num_prompts,
            request_throughput=throughput,
            output_throughput=throughput * load.output_len,
            request_goodput=throughput if e2el <= goodput.get("e2el", math.inf) else 0.0,
            duration=load.num_prompts / throughput,
            stats={"p99_e2el_ms": e2el, "mean_e2el_ms": e2el / 2, "p99_ttft_ms": e2el / 10},
        )
        return BenchRun(result, 25.0)

    async def reset_prefix_cache(self) -> bool:
        """Count the reset."""
        self.resets += 1
        return True

    async def abort(self) -> None:
        """Count the abort."""
        self.aborted += 1

    async def release(self) -> None:
        """Count the release (once per trial)."""
        self.released += 1
