"""Capacity on the compute-bound reference: the twin's answer against a real bisection (issue 38).

    python benchmarks/capacity.py                       # calibrate, then judge
    python benchmarks/capacity.py --profile NAME|FILE   # a profile of this very server
    python benchmarks/capacity.py --slo p99_ttft_ms=800 --input-len 256 --output-len 64

On one start of the real CPU build of vLLM 0.32 serving ``model_small`` (compute-bound,
~51M parameters; ``--model tiny|PATH`` for others), in order:

1. The server's own repeat spread: one load five times (``benchmarks/_reference.py``),
   the floor no twin and no bisection can beat.
2. A profile: ``vtc calibrate``'s procedure on this server (or ``--profile``).
3. ``vtc capacity URL --profile ... --slo ... --json``, timed (the twin's answer: the whole
   command, reading the server's flags included).
4. A real bisection of the same SLO (``tui.tune.strategies.rates.bisect``, the sweep's:
   the saturated throughput first, then 5 halvings, then the rate found run in full).
5. The real server at the predicted rate (must meet the SLO) and at 1.3x it (must miss).
6. ``vtc capacity URL ... --confirm --json``: its real loads counted.

Without ``--slo`` the SLO is four times the p99 TTFT the server shows at a fifth of its
saturated throughput (printed). Goals (a quiet machine): the predicted rate within 15% of
the bisection's; met at it and missed at 1.3x; ``--confirm`` in at most 3 loads; the twin's
answer in under 10 s. Exit 0 met, 1 missed, 3 when the machine was too busy to count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._quiet import QuietGate  # noqa: E402
from benchmarks._reference import add_model_option, measure_spread, reference_model  # noqa: E402
from tui.domain.calibration import design  # noqa: E402
from tui.domain.capacity import ABOVE, MOST_REAL_LOADS  # noqa: E402
from tui.domain.flags.serve import ServeFlags  # noqa: E402
from tui.domain.results import BenchResult  # noqa: E402
from tui.domain.sweep.outcome import KEPT_METRICS, Measurement  # noqa: E402
from tui.domain.sweep.slo import SloLimits  # noqa: E402
from tui.domain.workload import LoadSpec  # noqa: E402
from tui.modes.calibrate import LaunchedTarget, launched  # noqa: E402
from tui.server.provision import find_provisioned  # noqa: E402
from tui.store.profiles import load_profile  # noqa: E402
from tui.tune.context import TrialBench  # noqa: E402
from tui.tune.strategies.rates import bisect  # noqa: E402
from tui.twin.calibrate import Calibration, reset_prefix_cache  # noqa: E402

RATE_GOAL = 0.15  # the predicted rate within 15% of the real bisection's
ANSWER_GOAL_S = 10.0  # the twin's answer, the whole command
BISECT_STEPS = 5
SLO_SCALE = 4.0  # default SLO: this many times the p99 TTFT at a fifth of saturation


class RealBench:
    """The launched server as ``rates.bisect`` measures it (``TrialBench``'s two calls)."""

    def __init__(self, target: LaunchedTarget, slo: SloLimits) -> None:
        self.target = target
        self.slo = slo
        self.loads = 0

    async def reset_prefix_cache(self) -> None:
        await reset_prefix_cache(self.target.base_url, self.target.client)

    async def measure(self, load: LoadSpec, phase: str) -> Measurement:
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
            f"{'met' if verdict.met else 'missed'}",
            flush=True,
        )
        return Measurement(
            phase=phase,
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
        "--num-prompts", str(args.num_prompts), "--json", *extra,
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
    light = await bench.measure(load.model_copy(update={"request_rate": saturated / 5}), "light")
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


async def main_async(args: argparse.Namespace) -> int:
    found = find_provisioned()
    if found is None:
        print("real vLLM is not provisioned: run `vtc setup-cpu-vllm` first", file=sys.stderr)
        return 2
    model = reference_model(found, args.model)
    gate = QuietGate("capacity")
    data_dir = Path(tempfile.mkdtemp(prefix="vtc-capacity-"))
    os.environ["VTC_DATA_DIR"] = str(data_dir)
    flags = ServeFlags(
        model=str(model), enforce_eager=True, kv_cache_memory_bytes=64 * 2**20, max_model_len=4096
    )
    load = LoadSpec(
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.num_prompts,
        max_concurrency=None,
    )
    print(f"capacity: real vLLM {found.version} (CPU build), {model.name}", flush=True)
    async with launched(str(found.vllm), flags, data_dir, startup_timeout_s=600) as target:

        async def reset() -> bool:
            return await reset_prefix_cache(target.base_url, target.client)

        spread = await measure_spread(target.base_url, flags.model, reset)
        print(spread.report(), flush=True)
        profile = await profile_of(target, args, data_dir)
        gate.sample()
        probe = RealBench(target, SloLimits(limits={"p99_ttft_ms": 1e12}))
        saturated = await probe.measure(load, "saturated")
        slo_text = args.slo or await default_slo(
            probe, load, saturated.metrics["request_throughput"]
        )
        slo = SloLimits(
            limits={k: float(v) for k, v in (p.split("=") for p in slo_text.split(","))}
        )
        print(
            f"SLO: {slo.describe()}; workload {load.input_len} in / {load.output_len} out, "
            f"{load.num_prompts} requests per load, Poisson",
            flush=True,
        )
        twin, wall = vtc_capacity(target.base_url, profile, slo_text, args)
        predicted = float(twin["max_rate"])
        print(
            f"twin: max {predicted:.3g} req/s, interval {twin['interval']}, "
            f"{twin['predictions']} predictions; the command took {wall:.1f} s "
            f"(the twin's own {twin['seconds']:.1f} s)",
            flush=True,
        )
        gate.sample()
        bench = RealBench(target, slo)
        # the saturated run, judged by the SLO found: the bisection's ceiling
        judged = slo.verdict(BenchResult(stats=saturated.metrics), None)
        first = saturated.model_copy(update={"verdict": judged})
        found_real = await bisect(  # the sweep's bisection, on this server's loads
            cast(TrialBench, bench),
            first,
            short_prompts=load.num_prompts,
            full_prompts=load.num_prompts,
            steps=BISECT_STEPS,
        )
        index = found_real.chosen
        chosen = found_real.measurements[index] if index is not None else None
        real = chosen.load.request_rate if chosen is not None and chosen.verdict.met else 0.0
        print(f"real bisection: max {real:.3g} req/s in {bench.loads} loads", flush=True)
        gate.sample()
        at = await bench.measure(load.model_copy(update={"request_rate": predicted}), "predicted")
        above = await bench.measure(
            load.model_copy(update={"request_rate": predicted * ABOVE}), f"{ABOVE}x"
        )
        confirmed, _ = vtc_capacity(target.base_url, profile, slo_text, args, "--confirm")
        loads = len(confirmed.get("real_loads", []))
        print(f"--confirm: {loads} real loads; {confirmed.get('verdict', '')}", flush=True)
    ratio = predicted / real if real > 0 else float("inf")
    print(f"ratio twin / real bisection: {ratio:.3f}")
    gate.check("|twin - real| / real", abs(ratio - 1.0), goal=RATE_GOAL)
    gate.check(
        "met at the predicted rate (1 = yes)",
        float(at.verdict.met),
        goal=1.0,
        higher_is_better=True,
    )
    gate.check(
        f"missed at {ABOVE}x (1 = yes)",
        float(not above.verdict.met),
        goal=1.0,
        higher_is_better=True,
    )
    gate.check("--confirm's real loads", loads, goal=MOST_REAL_LOADS)
    gate.check("the twin's answer, s", wall, goal=ANSWER_GOAL_S)
    return gate.finish()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_option(parser)
    parser.add_argument("--profile", help="a profile of this server (else: calibrate first)")
    parser.add_argument("--slo", help="e.g. p99_ttft_ms=800 (default: 4x the light-load p99)")
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--num-prompts", type=int, default=100, help="requests per load")
    parser.add_argument("--budget", type=float, default=600.0, help="calibration seconds")
    parser.add_argument("--scale", type=float, default=1.0, help="calibration loads' size")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
