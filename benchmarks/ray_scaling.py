"""Wall time against GPU count for one sweep, on a simulated Ray cluster (issue 21, item 6).

    python benchmarks/ray_scaling.py [--quick] [--gpus 1,2,4,8,16] [--startup-s 60]
                                     [--ms-per-s 2] [--strategy grid|search]

One sweep (``a100-8b`` of ``sweep_efficiency.py``: Llama-3.1-8B on an A100 80 GB, 200
prompts, a p99 ITL SLO) runs over N lanes for each N. A lane is the what-if lane
(``tui.tune.whatif_lane``: the simulator's configuration checks, memory plan, scheduler and
cost model on a virtual clock) whose every start and every benchmark is a call on a Ray
actor holding the lane's GPU (one of N) for the trial's simulated time, compressed to
``--ms-per-s`` real milliseconds per simulated second: a server start takes
``--startup-s`` (a failed one ``--failed-start-s``: it fails at profiling), a benchmark its
simulated duration. The what-ifs themselves are computed once, before any timing (a warm-up
run fills the shared cache), so the wall time measured is what a cluster adds or takes
away: the strategy's batches and the barrier after each, Ray's scheduling, the head's
loop, not this 2-core machine's CPU (which the what-if's arithmetic would bound at 2).

Printed per N: wall seconds, the simulated wall time (wall / compression), speed-up and
efficiency against N = 1, the starts, and the load average; then one line::

    ray scaling: N=1 Xs ... ; stops scaling past N=K (best speed-up S)

Ray's start-up (``ray.init`` of a local instance, and its first actor) is timed apart and
printed: every N's wall excludes it, since one sweep pays it once. The goal, on paper
(issue 30): N=4's simulated wall with Ray's start-up added, at most 0.5 of N=1's (one
lane needs no Ray).
This run is where the 2 cores are *not* the limit (the lanes only hold simulated GPUs);
``ray_demo_wall.py`` is where they are. The shared gate (``benchmarks/_quiet.py``) prints
the load average and the verdict: exit 0 met, 1 missed, 3 not valid (load above 1.5).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import ray  # noqa: E402

from benchmarks._quiet import QuietGate  # noqa: E402
from benchmarks.sweep_efficiency import CASES  # noqa: E402
from tui.domain.flags.serve import ServeFlags  # noqa: E402
from tui.domain.results import SweepTag  # noqa: E402
from tui.domain.sweep import SweepSpec  # noqa: E402
from tui.domain.workload import LoadSpec  # noqa: E402
from tui.tune.lanes import BenchRun, StartResult  # noqa: E402
from tui.tune.run import SweepRun  # noqa: E402
from tui.tune.whatif_lane import Cache, WhatIfLane  # noqa: E402

PLATEAU = 1.10  # a doubling of GPUs that gains less than this has stopped scaling
GOAL = 0.5  # N=4 (Ray's start-up included) over N=1
GOAL_GPUS = 4


class SimulatedGpus:
    """The cluster's GPUs as one async Ray actor: each call holds one lane's GPU for the
    trial's simulated time, compressed. One worker process serves every lane (16 worker
    processes starting at once on 2 shared cores miss Ray's registration timeout)."""

    async def hold(self, seconds: float) -> float:
        """A GPU held for ``seconds``."""
        await asyncio.sleep(seconds)
        return seconds


class TimedLane:
    """A what-if lane whose starts and benchmarks hold one of the cluster's GPUs (a Ray task)
    for their simulated time."""

    def __init__(self, inner: WhatIfLane, task: object, scale: float, args: argparse.Namespace):
        self._inner, self._task, self._scale, self._args = inner, task, scale, args
        self.simulated_s = 0.0

    @property
    def name(self) -> str:
        """The inner lane's name."""
        return self._inner.name

    async def _hold(self, sim_seconds: float) -> None:
        self.simulated_s += sim_seconds
        await self._task.hold.remote(sim_seconds * self._scale)  # type: ignore[attr-defined]

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        """The what-if start, then the GPU held for a start's time."""
        result = await self._inner.start(flags, tag)
        await self._hold(self._args.startup_s if result.ok else self._args.failed_start_s)
        return result

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """The what-if benchmark, then the GPU held for its simulated duration."""
        run = await self._inner.bench(load, model=model, goodput=goodput)
        await self._hold(float(run.result.duration or 0.0))
        return run

    async def reset_prefix_cache(self) -> bool:
        """Instant (every what-if benchmark starts cold)."""
        return await self._inner.reset_prefix_cache()

    async def abort(self) -> None:
        """Nothing to cut short."""

    async def release(self) -> None:
        """Nothing held between trials."""


def spec_for(args: argparse.Namespace) -> SweepSpec:
    """The a100-8b scenario's spec for ``args.strategy`` (quick: its smaller space)."""
    case = next(c for c in CASES if c.name == "a100-8b")
    spec = case.build(args.strategy, seed=0, quick=args.quick)
    grid = spec.grid.model_copy(update={"rate_search": "none"})  # one benchmark per start
    return spec.model_copy(update={"grid": grid})


async def one_run(
    spec: SweepSpec, gpus: int, cache: Cache, task: object, args: argparse.Namespace
) -> tuple[float, int]:
    """Wall seconds and starts of the sweep over ``gpus`` lanes."""
    sim = ["--sim-gpu", "a100-80gb"]
    scale = args.ms_per_s / 1000.0
    lanes = [
        TimedLane(WhatIfLane(sim, name=f"gpu{i}", cache=cache), task, scale, args)
        for i in range(gpus)
    ]
    t0 = time.perf_counter()
    status = await SweepRun(spec, lanes).run()
    return time.perf_counter() - t0, status.starts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the scenario's smaller space")
    parser.add_argument("--gpus", default="1,2,4,8,16", help="GPU counts to run")
    parser.add_argument("--strategy", default="grid", choices=("grid", "search", "auto_tune"))
    parser.add_argument(
        "--startup-s",
        type=float,
        default=60.0,
        help="simulated seconds of a server start (weights, compile, graphs)",
    )
    parser.add_argument(
        "--failed-start-s",
        type=float,
        default=30.0,
        help="simulated seconds until a start fails (at memory profiling)",
    )
    parser.add_argument(
        "--ms-per-s", type=float, default=2.0, help="real milliseconds per simulated second"
    )
    args = parser.parse_args()
    counts = [int(x) for x in args.gpus.split(",") if x.strip()]
    spec = spec_for(args)
    print(
        f"sweep {spec.name}: {spec.strategy}, {spec.space_size()} combinations; start "
        f"{args.startup_s:g} s (failed {args.failed_start_s:g} s), "
        f"{args.ms_per_s:g} ms per simulated s"
    )
    gate = QuietGate("ray_scaling")
    began = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=1,
        num_gpus=0,
        object_store_memory=100 * 1024 * 1024,
        include_dashboard=False,
        log_to_driver=False,
    )
    try:
        task = ray.remote(SimulatedGpus).options(num_cpus=0, max_concurrency=64).remote()
        ray.get(task.hold.remote(0.0))  # the actor up: Ray is ready for a sweep
        startup = time.perf_counter() - began
        print(f"Ray start-up: {startup:.2f} s (ray.init of a local instance and its actor)")
        cache: Cache = {}
        asyncio.run(one_run(spec, max(counts), cache, task, args))  # warm-up: fills the cache
        rows = []
        for n in counts:
            wall, starts = asyncio.run(one_run(spec, n, cache, task, args))
            rows.append((n, wall, starts, gate.sample()))
    finally:
        ray.shutdown()
    report(rows, args)
    # In simulated seconds: a real sweep lasts the simulated wall, Ray's start-up its own.
    walls = {n: wall / (args.ms_per_s / 1000.0) for n, wall, _, _ in rows}
    if 1 in walls and GOAL_GPUS in walls:
        gate.check(
            f"N={GOAL_GPUS} simulated wall + Ray start-up over N=1 (on paper)",
            (walls[GOAL_GPUS] + startup) / walls[1],
            goal=GOAL,
        )
    else:
        print(f"  goal not checked: --gpus needs 1 and {GOAL_GPUS}")
    return gate.finish()


def report(rows: list[tuple[int, float, int, float]], args: argparse.Namespace) -> None:
    """The table and the one line: where doubling the GPUs stops paying."""
    base = rows[0][1] * rows[0][0]
    print("| GPUs | wall s | simulated wall | speed-up | efficiency | starts | load avg |")
    print("|---|---|---|---|---|---|---|")
    for n, wall, starts, load in rows:
        sim_min = wall / (args.ms_per_s / 1000.0) / 60.0
        speed = base / wall
        print(
            f"| {n} | {wall:.2f} | {sim_min:.1f} min | {speed:.2f}x | {speed / n:.0%} | "
            f"{starts} | {load:.1f} |"
        )
    stop = next((a for a, b in itertools.pairwise(rows) if a[1] / b[1] < PLATEAU), None)
    where = f"stops scaling past N={stop[0]}" if stop else "still scaling at the largest N"
    best = max(base / r[1] for r in rows)
    summary = " ".join(f"N={n} {wall:.2f}s" for n, wall, _, _ in rows)
    print(f"ray scaling: {summary}; {where} (best speed-up {best:.2f}x)")


if __name__ == "__main__":
    raise SystemExit(main())
