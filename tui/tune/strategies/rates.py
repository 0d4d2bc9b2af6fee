"""Measuring a configuration whose SLOs fail at the workload's rate.

- :func:`descent`: auto_tune.sh's (reference section 5, step 4): start at
  ``int(throughput) + 1`` req/s and count down by 1, emptying the prefix cache before each
  step, each step a short run; the first rate that meets the limits wins.
- :func:`bisect`: the SLO-bounded rate found by bisection between 0 and the throughput the
  server reached (it cannot sustain more), each probe a short run; the rate found is then
  measured in full. Steps halve the interval, so 5 steps land within 1/32 of it where the
  descent needs up to ``throughput`` runs.
"""

from __future__ import annotations

import asyncio
import math

from tui.domain.sweep.outcome import Measurement, Phase, PhaseKind
from tui.domain.workload import LoadSpec
from tui.tune.context import Evaluated, TrialBench

FULL_RETREATS = 3
"""Full runs below a rate whose full run missed the SLOs (see :func:`retreat`)."""
CONFIRM_SPAN = 0.25
"""How far below the trial's rate its confirmation may go for a seed that misses the SLOs."""


def at_rate(load: LoadSpec, rate: float, prompts: int) -> LoadSpec:
    """``load`` at ``rate`` req/s with ``prompts`` prompts."""
    return load.model_copy(update={"request_rate": rate, "num_prompts": prompts})


def best_met(measurements: list[Measurement]) -> int | None:
    """The index of the met measurement with the highest objective (``None``: none met)."""
    met = [i for i, m in enumerate(measurements) if m.verdict.met]
    return max(met, key=lambda i: measurements[i].objective) if met else None


async def descent(
    bench: TrialBench,
    first: Measurement,
    *,
    prompts: int,
    settle_s: float = 0.0,
) -> Evaluated:
    """auto_tune.sh's request-rate descent after ``first`` missed (its ``throughput``)."""
    out = [first]
    rate = int(first.metrics.get("request_throughput", 0.0)) + 1
    while rate > 0:
        await bench.reset_prefix_cache()
        if settle_s:
            await asyncio.sleep(settle_s)
        m = await bench.measure(at_rate(first.load, rate, prompts), Phase.of(PhaseKind.RATE, rate))
        out.append(m)
        if m.verdict.met:
            return Evaluated(out, len(out) - 1)
        rate -= 1
    return Evaluated(out, len(out) - 1)


async def bisect(
    bench: TrialBench,
    first: Measurement,
    *,
    short_prompts: int,
    full_prompts: int,
    steps: int,
    floor: float = 0.0,
    ceiling: float | None = None,
) -> Evaluated:
    """The highest rate that meets the SLOs, by bisection, then measured in full.

    ``floor``: a rate already seen to meet the SLOs (the search's short run at the
    incumbent's rate), so the steps refine above it. ``ceiling``: a rate already seen to
    miss them; without it, the throughput ``first`` reached (at most its rate).
    """
    out = [first]
    hi = float(ceiling) if ceiling is not None else _reached(first)
    lo = floor if 0 < floor < hi else 0.0
    for _ in range(steps):
        if hi <= 0:
            break
        mid = (lo + hi) / 2
        await bench.reset_prefix_cache()
        m = await bench.measure(
            at_rate(first.load, round(mid, 3), short_prompts),
            Phase.of(PhaseKind.RATE, f"{mid:.3g}"),
        )
        out.append(m)
        lo, hi = (mid, hi) if m.verdict.met else (lo, mid)
    if lo <= 0:
        return Evaluated(out, len(out) - 1)
    held = [m.load.request_rate for m in out[1:] if m.verdict.met and m.load.request_rate < lo]
    safest = min([r for r in (floor, *held) if r > 0], default=0.0)
    return await _settle_full(bench, first.load, out, lo, safest, full_prompts)


def _reached(first: Measurement) -> float:
    """The throughput ``first`` reached, at most its offered rate: the server could not
    serve more in that run."""
    ceiling = first.metrics.get("request_throughput", 0.0)
    if math.isfinite(first.load.request_rate):
        ceiling = min(ceiling, first.load.request_rate) or first.load.request_rate
    return float(ceiling)


async def _settle_full(
    bench: TrialBench,
    load: LoadSpec,
    out: list[Measurement],
    rate: float,
    fallback: float,
    prompts: int,
) -> Evaluated:
    """The rate the short probes found, measured in full; lower if the full run misses.

    The trial stands for a full benchmark, never for a short probe: a short probe's p99 and
    throughput are noisier (fewer requests, a larger share of ramp-up and drain), so the
    best of several met probes is a lucky draw that a full run, or another seed, does not
    repeat. If the full run misses, :func:`retreat` looks below it.
    """
    await bench.reset_prefix_cache()
    out.append(
        await bench.measure(
            at_rate(load, round(rate, 3), prompts), Phase.of(PhaseKind.RATE, f"{rate:.3g}")
        )
    )
    if out[-1].verdict.met:
        return Evaluated(out, len(out) - 1)
    found = await retreat(bench, at_rate(load, rate, prompts), out, fallback)
    return Evaluated(out, found if found is not None else len(out) - 1)


async def retreat(
    bench: TrialBench, load: LoadSpec, out: list[Measurement], fallback: float
) -> int | None:
    """Below ``load``'s rate, which missed the SLOs in full: the highest full run that meets them.

    Up to ``FULL_RETREATS`` full runs bisect between ``fallback`` (a lower rate thought to
    hold: the lowest a short probe or the search's incumbent held; else 0) and the rate,
    the last one at ``fallback`` itself while none met. Appends to ``out``; the index of
    the measurement found (``None``: none met).
    """
    hi = load.request_rate
    lo = fallback if 0 < fallback < hi else 0.0
    best: int | None = None
    for step in range(1, FULL_RETREATS + 1):
        last_try = step == FULL_RETREATS and best is None and lo > 0
        probe = lo if last_try else (lo + hi) / 2
        await bench.reset_prefix_cache()
        m = await bench.measure(
            at_rate(load, round(probe, 3), load.num_prompts),
            Phase.of(PhaseKind.RATE, f"{probe:.3g}"),
        )
        out.append(m)
        if m.verdict.met:
            best, lo = len(out) - 1, probe
        else:
            hi = probe
    return best


async def hold_under_seeds(bench: TrialBench, load: LoadSpec, seeds: list[int]) -> Evaluated:
    """``load`` under each of ``seeds``; the worst seed stands for it (SCOOT's robust re-run).

    A rate found at the edge of the SLOs under one seed (one arrival order, one set of
    prompts) misses them under another about as often as not. Rather than drop the
    configuration, a seed that misses lowers the rate to the one it holds (:func:`retreat`,
    at most ``CONFIRM_SPAN`` lower), and every seed is measured again at that rate: what
    is reported is the worst seed at a rate all of them held. Benchmarks only, no start.
    """
    out: list[Measurement] = []
    done: dict[tuple[int, float], int] = {}
    rate = load.request_rate
    for _ in range(len(seeds)):
        missed: int | None = None
        held: list[int] = []
        for seed in seeds:
            if (seed, rate) not in done:
                if out:
                    await bench.reset_prefix_cache()
                m = await bench.measure(
                    load.model_copy(update={"seed": seed, "request_rate": rate}),
                    Phase.of(PhaseKind.SEED, seed),
                )
                out.append(m)
                done[seed, rate] = len(out) - 1
            index = done[seed, rate]
            if not out[index].verdict.met:
                missed = index
                break
            held.append(index)
        if missed is None:
            return Evaluated(out, min(held, key=lambda i: out[i].objective))
        top = rate if math.isfinite(rate) else out[missed].metrics.get("request_throughput", 0.0)
        if top <= 0:
            break
        first = len(out)
        found = await retreat(
            bench, at_rate(out[missed].load, top, load.num_prompts), out, top * (1 - CONFIRM_SPAN)
        )
        for i in range(first, len(out)):
            done[out[i].load.seed, out[i].load.request_rate] = i
        if found is None:
            return Evaluated(out, missed)
        rate = out[found].load.request_rate
    return Evaluated(out, len(out) - 1)
