"""Capacity on the compute-bound reference: the twin's answer against a real bisection (issue 38).

    python benchmarks/capacity.py                       # calibrate, then judge
    python benchmarks/capacity.py --profile NAME|FILE   # a profile of this very server
    python benchmarks/capacity.py --slo p99_ttft_ms=800 --input-len 256 --output-len 64
    python benchmarks/capacity.py --load-seconds 90 --num-prompts 200   # longer loads

On one start of the real CPU build of vLLM 0.32 serving ``model_small`` (compute-bound,
~51M parameters; ``--model tiny|PATH`` for others), in order:

1. The server's own repeat spread: one load five times (``benchmarks/_reference.py``'s
   128 in / 64 out, 8 at once, ``--spread-prompts`` requests each), the floor no twin and
   no bisection can beat.
2. A profile: ``vtc calibrate``'s procedure on this server (or ``--profile``).
3. The saturated throughput (an unbounded rate), then, without ``--slo``, the light load.
4. ``vtc capacity URL --profile ... --slo ... --json``, timed (the twin's answer: the whole
   command, reading the server's flags included).
5. A real bisection of the same SLO: from the saturated throughput by factors of 1.3, up
   until a load misses or down until one meets (a load of finite length can meet a latency
   SLO above what a burst served), then the sweep's bisection
   (``tui.tune.strategies.rates.bisect``) between the highest rate met and that miss, 4
   halvings, then the rate found run in full.
6. The real server at the predicted rate (must meet the SLO) and at 1.3x it (must miss).
7. ``vtc capacity URL ... --confirm --json``: its real loads counted.

Every load at a rate R sends R x ``--load-seconds`` requests, at least 20 (a p99 over
fewer means little) and at most ``--num-prompts`` (:func:`tui.domain.capacity.sized_prompts`,
the rule ``vtc capacity`` sizes the twin's loads and ``--confirm``'s by, given the same two
options), so a load lasts about ``--load-seconds``, or 20 / R s at a low rate. The saturated
load has no rate: it sends what the rate guessed from the spread (its request throughput,
scaled by the workloads' tokens per request) serves in ``--load-seconds``. Each load's size
and each step's time are printed.

Without ``--slo`` the SLO is four times the p99 TTFT the server shows at a fifth of its
saturated throughput (printed). Goals (a quiet machine): the predicted rate within 15% of
the bisection's; met at it and missed at 1.3x; ``--confirm`` in at most 3 loads; the twin's
answer in under 10 s. Exit 0 met, 1 missed, 3 when the machine was too busy to count.

The defaults fit a session on a two-core machine (about 28-32 minutes on ``model_small``;
``benchmarks/README.md`` has the arithmetic): 64 in / 32 out, 45 s per load, at most 100
requests, a spread of 16 requests a run, the calibration's 600 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._quiet import QuietGate  # noqa: E402
from benchmarks._reference import (  # noqa: E402
    SPREAD_LOAD,
    SPREAD_RUNS,
    RepeatSpread,
    add_model_option,
    measure_spread,
    provisioned_or_say,
    reference_model,
)
from tui.app.arg_types import positive_float  # noqa: E402
from tui.domain.calibration import design  # noqa: E402
from tui.domain.capacity import (  # noqa: E402
    ABOVE,
    LEAST_PROMPTS,
    MOST_REAL_LOADS,
    sized_load,
    sized_prompts,
)
from tui.domain.flags.serve import ServeFlags  # noqa: E402
from tui.domain.sweep.outcome import KEPT_METRICS, Measurement, Phase, PhaseKind  # noqa: E402
from tui.domain.sweep.slo import SloLimits  # noqa: E402
from tui.domain.workload import LoadSpec  # noqa: E402
from tui.modes.calibrate import LaunchedTarget, launched  # noqa: E402
from tui.store.profiles import load_profile  # noqa: E402
from tui.tune.context import TrialBench  # noqa: E402
from tui.tune.strategies.rates import bisect  # noqa: E402
from tui.twin.calibrate import Calibration, reset_prefix_cache  # noqa: E402

RATE_GOAL = 0.15  # the predicted rate within 15% of the real bisection's
ANSWER_GOAL_S = 10.0  # the twin's answer, the whole command
BISECT_STEPS = 4  # halvings of the bracket [met, missed]: within 1/16 of it
STEPS_OUT = 5  # loads from the saturated throughput, by factors of ABOVE, to a met and a miss
SLO_SCALE = 4.0  # default SLO: this many times the p99 TTFT at a fifth of saturation
LIGHT_SHARE = 0.2  # the light load's rate, as a share of the saturated throughput
LOAD_SECONDS = 45.0  # each load at a rate R: R x this many requests (see sized_prompts)
MOST_PROMPTS = 100  # ... and at most this many
SPREAD_PROMPTS = 16  # the spread's requests a run: two rounds of its 8 slots


def tokens(load: LoadSpec) -> int:
    """Prompt and output tokens of one request of ``load``."""
    return load.input_len + load.output_len


def guess_rate(spread: RepeatSpread, spread_load: LoadSpec, load: LoadSpec) -> float | None:
    """The request rate ``load`` saturates at, guessed from the spread's runs: their median
    output throughput over ``spread_load``'s output tokens is its request rate, scaled by
    the tokens per request (a compute-bound server's cost grows with them); ``None``
    without a measured throughput."""
    values = [v for v in spread.values.get("output_throughput", []) if v > 0]
    if not values:
        return None
    rate = statistics.median(values) / spread_load.output_len
    return rate * tokens(spread_load) / tokens(load)


def saturated_prompts(guess: float | None, seconds: float, most: int) -> int:
    """The saturated load's requests: what ``guess`` req/s serves in ``seconds`` (at least
    :data:`~tui.domain.capacity.LEAST_PROMPTS`, at most ``most``; ``most`` without a guess)."""
    return sized_prompts(guess if guess is not None else math.inf, seconds, most)


def load_line(load: LoadSpec) -> str:
    """``39 requests at 0.52 req/s (~75 s of arrivals)``: a load's size, printed."""
    if not math.isfinite(load.request_rate):
        return f"{load.num_prompts} requests at once"
    span = load.num_prompts / load.request_rate
    return (
        f"{load.num_prompts} requests at {load.request_rate:.3g} req/s (~{span:.0f} s of arrivals)"
    )


class Laps:
    """Each step's wall time, printed as it ends."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()

    def lap(self, step: str) -> None:
        """Print how long ``step`` took, and the time since the start."""
        now = time.monotonic()
        print(f"[{step}: {now - self.last:.0f} s; {now - self.start:.0f} s in all]", flush=True)
        self.last = now


class RealBench:
    """The launched server as ``rates.bisect`` measures it (``TrialBench``'s two calls)."""

    def __init__(self, target: LaunchedTarget, slo: SloLimits, seconds: float) -> None:
        self.target = target
        self.slo = slo
        self.seconds = seconds
        self.loads = 0

    async def reset_prefix_cache(self) -> None:
        await reset_prefix_cache(self.target.base_url, self.target.client)

    async def measure(self, load: LoadSpec, phase: str) -> Measurement:
        """``load`` sized by its rate (its ``num_prompts`` the most), run and judged."""
        load = sized_load(load, load.request_rate, self.seconds)
        print(f"  real {phase:>10}: {load_line(load)}", flush=True)
        t0 = time.monotonic()
        runner = self.target.load_runner()
        result = await runner.run(
            load, base_url=self.target.base_url, model=self.target.flags.model
        )
        self.loads += 1
        metrics = {k: float(v) for k in KEPT_METRICS if (v := result.metric(k)) is not None}
        verdict = self.slo.verdict(result, None)
        shown = ", ".join(f"{k} {metrics.get(k, float('nan')):.0f}" for k in self.slo.limits)
        print(
            f"  real {phase:>10} at {load.request_rate:.3g} req/s: served "
            f"{metrics.get('request_throughput', 0.0):.3g} req/s, {shown}: "
            f"{'met' if verdict.met else 'missed'} ({time.monotonic() - t0:.0f} s)",
            flush=True,
        )
        return Measurement(
            phase=Phase(phase),
            load=load,
            metrics=metrics,
            verdict=verdict,
            objective=metrics.get("request_throughput", 0.0),
        )


def vtc_capacity(
    url: str, profile: str, slo: str, args: argparse.Namespace, *extra: str
) -> tuple[dict[str, Any], float]:
    """``vtc capacity URL ... --json`` in its own process: its JSON and its wall time."""
    argv = [
        sys.executable, "-m", "tui.cli", "capacity", url, "--profile", profile, "--slo", slo,
        "--input-len", str(args.input_len), "--output-len", str(args.output_len),
        "--num-prompts", str(args.num_prompts), "--load-seconds", str(args.load_seconds),
        "--json", *extra,
    ]  # fmt: skip
    print("$ vtc " + " ".join(argv[3:]), flush=True)
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.monotonic() - t0
    if done.returncode not in (0, 1):
        raise SystemExit(f"vtc capacity failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout), wall


async def default_slo(bench: RealBench, load: LoadSpec, saturated: float) -> str:
    """``p99_ttft_ms=`` four times the p99 TTFT at a fifth of the saturated throughput."""
    light_rate = saturated * LIGHT_SHARE
    light = await bench.measure(load.model_copy(update={"request_rate": light_rate}), "light")
    return f"p99_ttft_ms={SLO_SCALE * light.metrics['p99_ttft_ms']:.0f}"


async def profile_of(target: LaunchedTarget, args: argparse.Namespace, data_dir: Path) -> str:
    """``--profile``, or a calibration of this server (``vtc calibrate``'s procedure)."""
    if args.profile:
        load_profile(args.profile, data_dir)  # refused at once when it is none
        return str(args.profile)
    t0 = time.monotonic()
    run = Calibration(
        name="capacity",
        target=target,
        loads=design(4096, args.scale, passes=2),
        data_dir=data_dir,
        budget_s=args.budget,
    )
    profile = await run.run(lambda p: print(f"\r  {p.line()}", end="", flush=True))
    print(f"\n  calibrated in {time.monotonic() - t0:.0f} s: {profile.errors_line()}")
    return "capacity"


def plan_line(args: argparse.Namespace) -> str:
    """The sizes this run chose, printed before it starts."""
    least = min(LEAST_PROMPTS, args.num_prompts)
    return (
        f"sizes: workload {args.input_len} in / {args.output_len} out, Poisson; each load at R "
        f"req/s sends R x {args.load_seconds:g} s requests ({least}-{args.num_prompts}); "
        f"spread {SPREAD_RUNS} runs of {args.spread_prompts} requests "
        f"({SPREAD_LOAD.input_len} in / {SPREAD_LOAD.output_len} out, "
        f"{SPREAD_LOAD.max_concurrency} at once); "
        + ("profile " + args.profile if args.profile else f"calibration budget {args.budget:g} s")
    )


@dataclass(frozen=True)
class Real:
    """The real bisection's answer: the highest rate it saw meet the SLO, and whether a
    miss above it bounded the search (else the answer lies higher: a lower bound)."""

    rate: float
    bounded: bool


@dataclass(frozen=True)
class Figures:
    """What the run judges."""

    predicted: float  # the twin's highest rate, req/s
    real: Real  # the real bisection's
    met_at: bool  # the real server met the SLO at the predicted rate
    missed_above: bool  # ... and missed it at ABOVE times it
    confirm_loads: int  # --confirm's real loads
    answer_s: float  # the twin's answer, the whole command


async def saturation(
    target: LaunchedTarget, args: argparse.Namespace, load: LoadSpec, spread: RepeatSpread
) -> Measurement:
    """The saturated load, sized by the rate the spread suggests."""
    guess = guess_rate(spread, SPREAD_LOAD, load)
    prompts = saturated_prompts(guess, args.load_seconds, args.num_prompts)
    shown = f"{guess:.3g} req/s" if guess is not None else "no guess"
    print(f"saturated load: {prompts} requests (the spread suggests {shown})", flush=True)
    probe = RealBench(target, SloLimits(limits={"p99_ttft_ms": 1e12}), args.load_seconds)
    return await probe.measure(load.model_copy(update={"num_prompts": prompts}), "saturated")


@dataclass(frozen=True)
class Bracket:
    """The real server's rates around its answer, a factor :data:`ABOVE` apart: the highest
    seen to meet the SLO (0: none) and the lowest seen to miss it (``None``: none)."""

    met: float
    missed: Measurement | None


async def bracket(bench: RealBench, load: LoadSpec, start: float) -> Bracket:
    """From ``start`` (the saturated throughput) by factors of :data:`ABOVE`: upward until
    a load misses the SLO, or downward until one meets it (at most :data:`STEPS_OUT` each).

    A load of finite length can meet a latency SLO at a rate above what a burst served
    (its queue has no time to grow past the limit), so the saturated throughput bounds
    nothing here: the search sees a miss before it bisects (an earlier bisection, capped at
    a burst's 0.775 req/s, met at every probe). The bracket is the same width either way,
    so the bisection's steps land as close in either case.
    """
    met, missed, rate = 0.0, None, start
    for _ in range(STEPS_OUT):
        await bench.reset_prefix_cache()
        probe = load.model_copy(update={"request_rate": round(rate, 3)})
        found = await bench.measure(probe, Phase.of(PhaseKind.RATE, f"{rate:.3g}"))
        if found.verdict.met:
            met = rate
            if missed is not None:
                break
            rate *= ABOVE
        else:
            missed = found
            if met > 0:
                break
            rate /= ABOVE
    return Bracket(met=met, missed=missed)


async def bisection(bench: RealBench, saturated: Measurement, load: LoadSpec) -> Real:
    """The real bisection's highest rate meeting ``bench``'s SLO between the rates
    :func:`bracket` found (0: none)."""
    start = saturated.metrics.get("request_throughput", 0.0)
    around = await bracket(bench, load, start)
    if around.missed is None or around.met <= 0:
        print(
            f"real bisection: no bracket in {bench.loads} loads (met up to {around.met:.3g} "
            "req/s, " + ("never missed: a lower bound)" if around.missed is None else "never met)"),
            flush=True,
        )
        return Real(rate=around.met, bounded=False)
    found_real = await bisect(  # the sweep's bisection, on this server's loads
        cast(TrialBench, bench),
        around.missed,
        short_prompts=load.num_prompts,  # RealBench sizes each by its rate
        full_prompts=load.num_prompts,
        steps=BISECT_STEPS,
        floor=around.met,
        ceiling=around.missed.load.request_rate,
    )
    index = found_real.chosen
    chosen = found_real.measurements[index] if index is not None else None
    real = chosen.load.request_rate if chosen is not None and chosen.verdict.met else 0.0
    print(
        f"real bisection: max {real:.3g} req/s (met {around.met:.3g}, missed "
        f"{around.missed.load.request_rate:.3g} before it) in {bench.loads} loads",
        flush=True,
    )
    return Real(rate=real, bounded=True)


async def measure_all(
    target: LaunchedTarget,
    args: argparse.Namespace,
    data_dir: Path,
    gate: QuietGate,
    laps: Laps,
) -> Figures:
    """Every step on the one server (see the module), each step's time printed."""
    load = LoadSpec(
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.num_prompts,
        max_concurrency=None,
    )

    async def reset() -> bool:
        return await reset_prefix_cache(target.base_url, target.client)

    spread_load = SPREAD_LOAD.model_copy(update={"num_prompts": args.spread_prompts})
    spread = await measure_spread(target.base_url, target.flags.model, reset, spread_load)
    print(spread.report(), flush=True)
    laps.lap("spread")
    profile = await profile_of(target, args, data_dir)
    laps.lap("profile")
    gate.sample()
    saturated = await saturation(target, args, load, spread)
    laps.lap("saturated load")
    probe = RealBench(target, SloLimits(limits={"p99_ttft_ms": 1e12}), args.load_seconds)
    slo_text = args.slo or await default_slo(probe, load, saturated.metrics["request_throughput"])
    laps.lap("light load" if not args.slo else "SLO given")
    slo = SloLimits(limits={k: float(v) for k, v in (p.split("=") for p in slo_text.split(","))})
    print(f"SLO: {slo.describe()}", flush=True)
    twin, wall = vtc_capacity(target.base_url, profile, slo_text, args)
    predicted = float(twin["max_rate"])
    print(
        f"twin: max {predicted:.3g} req/s, interval {twin['interval']}, "
        f"{twin['predictions']} predictions; the command took {wall:.1f} s "
        f"(the twin's own {twin['seconds']:.1f} s)",
        flush=True,
    )
    laps.lap("twin")
    gate.sample()
    bench = RealBench(target, slo, args.load_seconds)
    real = await bisection(bench, saturated, load)
    laps.lap("bisection")
    gate.sample()
    at = await bench.measure(load.model_copy(update={"request_rate": predicted}), "predicted")
    above = await bench.measure(
        load.model_copy(update={"request_rate": predicted * ABOVE}), f"{ABOVE}x"
    )
    laps.lap(f"met at 1x / missed at {ABOVE}x")
    confirmed, _ = vtc_capacity(target.base_url, profile, slo_text, args, "--confirm")
    loads = len(confirmed.get("real_loads", []))
    print(f"--confirm: {loads} real loads; {confirmed.get('verdict', '')}", flush=True)
    laps.lap("--confirm")
    return Figures(predicted, real, at.verdict.met, not above.verdict.met, loads, wall)


def judge(gate: QuietGate, figures: Figures) -> int:
    """The goals checked; the exit code."""
    real = figures.real.rate
    gate.check(
        "the real bisection bounded by a miss (1 = yes)",
        float(figures.real.bounded),
        goal=1.0,
        higher_is_better=True,
    )
    ratio = figures.predicted / real if real > 0 else float("inf")
    print(f"ratio twin / real bisection: {ratio:.3f}")
    gate.check("|twin - real| / real", abs(ratio - 1.0), goal=RATE_GOAL)
    gate.check(
        "met at the predicted rate (1 = yes)",
        float(figures.met_at),
        goal=1.0,
        higher_is_better=True,
    )
    gate.check(
        f"missed at {ABOVE}x (1 = yes)",
        float(figures.missed_above),
        goal=1.0,
        higher_is_better=True,
    )
    gate.check("--confirm's real loads", figures.confirm_loads, goal=MOST_REAL_LOADS)
    gate.check("the twin's answer, s", figures.answer_s, goal=ANSWER_GOAL_S)
    return gate.finish()


async def main_async(args: argparse.Namespace) -> int:
    found = provisioned_or_say()
    if found is None:
        return 2
    model = reference_model(found, args.model)
    gate = QuietGate("capacity")
    data_dir = Path(tempfile.mkdtemp(prefix="vtc-capacity-"))
    os.environ["VTC_DATA_DIR"] = str(data_dir)
    flags = ServeFlags(
        model=str(model), enforce_eager=True, kv_cache_memory_bytes=64 * 2**20, max_model_len=4096
    )
    print(f"capacity: real vLLM {found.version} (CPU build), {model.name}", flush=True)
    print(plan_line(args), flush=True)
    laps = Laps()
    async with launched(str(found.vllm), flags, data_dir, startup_timeout_s=600) as target:
        laps.lap("server start")
        figures = await measure_all(target, args, data_dir, gate, laps)
    return judge(gate, figures)


def parser() -> argparse.ArgumentParser:
    """The benchmark's options (the defaults fit a session: see the module)."""
    out = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_option(out)
    out.add_argument("--profile", help="a profile of this server (else: calibrate first)")
    out.add_argument("--slo", help="e.g. p99_ttft_ms=800 (default: 4x the light-load p99)")
    out.add_argument("--input-len", type=int, default=64, help="prompt tokens (default 64)")
    out.add_argument("--output-len", type=int, default=32, help="output tokens (default 32)")
    out.add_argument(
        "--num-prompts",
        type=int,
        default=MOST_PROMPTS,
        help=f"the most requests of one load (default {MOST_PROMPTS})",
    )
    out.add_argument(
        "--load-seconds",
        type=positive_float,
        default=LOAD_SECONDS,
        help=f"each load at R req/s sends R x this many requests, at least {LEAST_PROMPTS} "
        f"(default {LOAD_SECONDS:g})",
    )
    out.add_argument(
        "--spread-prompts",
        type=int,
        default=SPREAD_PROMPTS,
        help=f"requests of each of the spread's {SPREAD_RUNS} runs (default {SPREAD_PROMPTS})",
    )
    out.add_argument("--budget", type=float, default=600.0, help="calibration seconds")
    out.add_argument("--scale", type=float, default=1.0, help="calibration loads' size")
    return out


def main() -> int:
    return asyncio.run(main_async(parser().parse_args()))


if __name__ == "__main__":
    sys.exit(main())
