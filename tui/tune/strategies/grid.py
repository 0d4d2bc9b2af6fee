"""The Cartesian product, as ``vllm bench sweep serve`` runs it.

Every combination of the spec's parameters (times the ``--serve-params`` records, when
given) is one server start; on it, every ``--bench-params`` record whose ``--link-vars``
match is benchmarked, the prefix cache emptied between benchmarks (bench sweep serve calls
``/reset_prefix_cache`` after each). A combination the flag rules refuse is not started.
The rate policy (``[grid] rate_search``) can add auto_tune.sh's descent or a bisection for
a benchmark that misses the limits; by default there is none, as in bench sweep serve.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pydantic import ValidationError

from tui.domain.sweep.outcome import Measurement, Phase, PhaseKind
from tui.domain.sweep.spec import SweepSpec
from tui.domain.workload import LoadSpec
from tui.tune.context import Evaluated, Procedure, SweepContext, TrialBench, TrialKind, TrialPlan
from tui.tune.decisions import Decision, Planned
from tui.tune.prune import explain
from tui.tune.space import (
    NAME_KEY,
    Choice,
    base_load,
    bench_load,
    describe,
    linked,
    product,
    records,
    serve_choice,
)
from tui.tune.strategies.rates import best_met, bisect, descent


def serve_choices(spec: SweepSpec) -> list[Choice]:
    """The parameters' product, each combined with every ``serve_params`` record."""
    combos = list(product(spec))  # bounded: the spec refused a larger space
    extra = spec.grid.serve_params
    if not extra:
        return combos
    serve = [serve_choice(r) for r in records(extra, "serve_params")]
    return [{**combo, **record} for combo in combos for record in serve]


def bench_loads(spec: SweepSpec) -> list[tuple[dict[str, object], LoadSpec]]:
    """``(record, load)`` per ``bench_params`` record (one, the workload's, without them)."""
    load = base_load(spec)
    if not spec.grid.bench_params:
        return [({}, load)]
    return [(r, bench_load(load, r)) for r in records(spec.grid.bench_params, "bench_params")]


def grid_procedure(spec: SweepSpec, loads: list[tuple[dict[str, object], LoadSpec]]) -> Procedure:
    """Each bench record in turn; the rate policy for one that misses; the best met.

    Each record stands by its own measurement or by its rate policy's pick (a full-length
    run, never one of the bisection's short probes), and the best of those that met the SLOs
    stands for the trial.
    """
    policy = spec.grid.rate_search

    async def run(bench: TrialBench) -> Evaluated:
        out: list[Measurement] = []
        stands: list[int] = []  # per record, the measurement that stands for it
        for i, (record, load) in enumerate(loads):
            if i:
                await bench.reset_prefix_cache()
            name = record.get(NAME_KEY) or _text(record)
            phase = Phase.of(PhaseKind.STEP, name) if name else Phase.of(PhaseKind.FULL)
            first = await bench.measure(load, phase)
            if first.verdict.met or policy == "none":
                stands.append(len(out))
                out.append(first)
                continue
            if policy == "descent":
                more = await descent(bench, first, prompts=spec.auto_tune.descent_prompts)
            else:
                more = await bisect(
                    bench,
                    first,
                    short_prompts=max(1, load.num_prompts // 4),
                    full_prompts=load.num_prompts,
                    steps=spec.search.bisect_steps,
                )
            if more.chosen is not None:  # the rate policy's pick, never a short probe
                stands.append(len(out) + more.chosen)
            out.extend(more.measurements)
        pick = best_met([out[i] for i in stands])
        if pick is not None:
            return Evaluated(out, stands[pick])
        return Evaluated(out, len(out) - 1 if out else None)

    return run


def _text(record: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in record.items())


class Grid:
    """Every combination, one start each."""

    async def run(self, ctx: SweepContext) -> AsyncIterator[Decision]:
        """Plan every valid combination, then run them (a batch per free lane set)."""
        spec = ctx.spec
        loads = bench_loads(spec)
        plans = []
        for choice in serve_choices(spec):
            try:
                flags = spec.base.flags_for(choice)
            except ValidationError as exc:
                ctx.prune(choice, None, explain(exc))
                continue
            applicable = [(r, load) for r, load in loads if linked(choice, r, spec.grid.link_vars)]
            if not applicable:
                ctx.prune(choice, flags, "no bench record matches its --link-vars")
                continue
            plans.append(
                TrialPlan(
                    choice,
                    flags,
                    describe(choice),
                    grid_procedure(spec, applicable),
                    TrialKind.GRID,
                )
            )
        yield Planned(len(plans))
        await ctx.run_batches(plans)
