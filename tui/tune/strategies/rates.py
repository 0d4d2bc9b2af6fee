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

from tui.domain.sweep.outcome import Measurement
from tui.domain.workload import LoadSpec
from tui.tune.context import Evaluated, TrialBench

FULL_RETREATS = 3
"""Full runs below a bisected rate whose full run missed the SLOs (see :func:`bisect`)."""


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
        m = await bench.measure(at_rate(first.load, rate, prompts), f"rate {rate}")
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
) -> Evaluated:
    """The highest rate that meets the SLOs, by bisection, then measured in full.

    ``floor``: a rate already seen to meet the SLOs (the search's short run at the
    incumbent's rate), so the steps refine above it.
    """
    out = [first]
    ceiling = first.metrics.get("request_throughput", 0.0)
    if math.isfinite(first.load.request_rate):
        ceiling = min(ceiling, first.load.request_rate) or first.load.request_rate
    hi = float(ceiling)
    lo = floor if 0 < floor < hi else 0.0
    for _ in range(steps):
        if hi <= 0:
            break
        mid = (lo + hi) / 2
        await bench.reset_prefix_cache()
        m = await bench.measure(
            at_rate(first.load, round(mid, 3), short_prompts), f"rate {mid:.3g}"
        )
        out.append(m)
        lo, hi = (mid, hi) if m.verdict.met else (lo, mid)
    if lo <= 0:
        return Evaluated(out, len(out) - 1)
    held = [m.load.request_rate for m in out[1:] if m.verdict.met and m.load.request_rate < lo]
    safest = min([r for r in (floor, *held) if r > 0], default=0.0)
    return await _settle_full(bench, first.load, out, lo, safest, full_prompts)


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
    repeat. If the full run misses, up to ``FULL_RETREATS`` full runs bisect between the
    lowest rate a probe (or the search's incumbent) held within the SLOs (``fallback``;
    else 0) and ``rate``, the last one at ``fallback`` itself while none met; the highest
    full run that meets them stands for the trial.
    """
    hi, lo = rate, fallback if 0 < fallback < rate else 0.0
    await bench.reset_prefix_cache()
    out.append(await bench.measure(at_rate(load, round(rate, 3), prompts), f"rate {rate:.3g}"))
    if out[-1].verdict.met:
        return Evaluated(out, len(out) - 1)
    best: int | None = None
    for step in range(1, FULL_RETREATS + 1):
        if step == FULL_RETREATS and best is None and lo > 0:
            probe = lo  # the last try: the lowest rate a short probe held
        else:
            probe = (lo + hi) / 2
        await bench.reset_prefix_cache()
        m = await bench.measure(at_rate(load, round(probe, 3), prompts), f"rate {probe:.3g}")
        out.append(m)
        if m.verdict.met:
            best, lo = len(out) - 1, probe
        else:
            hi = probe
    return Evaluated(out, best if best is not None else len(out) - 1)
