"""auto_tune.sh, step for step (reference section 5), without its defects.

1. The ``gpu_memory_utilization`` probe: from 0.98 down by 0.01 while >= 0.90, start the
   server with the *last* values of the two lists (the script's ``${list[-1]}``: the
   largest when the lists ascend); the first that comes up is used for every later run.
   None: "Cannot find a proper gpu_memory_utilization over 0.9 to serve the model".
2. Each ``max_num_seqs x max_num_batched_tokens`` pair: restart with that utilization,
   benchmark at rate ``inf`` with 1000 prompts and the shared prefix sized from the cache-hit
   target; if the limits are missed, the request-rate descent (``rates.descent``).
3. The best: the highest request throughput among the pairs that met the limits.

Not copied: ``pkill -if vllm`` (each trial replaces only its own server), the 10-minute
readiness poll (vtc's supervisor reports ready or failed as it happens), benchmarking a
server that failed to start, ``--disable-log-requests`` (gone in vLLM 0.32), the profiling
run (0.32 needs ``--profiler-config`` on the server for ``bench serve --profile``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pydantic import ValidationError

from tui.domain.sweep.outcome import Phase, PhaseKind, TrialState
from tui.domain.sweep.spec import SweepSpec
from tui.tune.context import (
    Evaluated,
    Procedure,
    SweepContext,
    SweepFailed,
    TrialBench,
    TrialKind,
    TrialPlan,
    nothing,
)
from tui.tune.decisions import Decision, Note, Planned
from tui.tune.prune import explain
from tui.tune.space import Choice, base_load
from tui.tune.strategies.rates import at_rate, descent

NO_UTILIZATION = (
    "Cannot find a proper gpu_memory_utilization over {low} to serve the model, please "
    "check the trials' logs"
)


def pair_procedure(spec: SweepSpec) -> Procedure:
    """Rate ``inf`` with the first-run prompts; the descent when the limits are missed."""
    opts = spec.auto_tune

    async def run(bench: TrialBench) -> Evaluated:
        load = at_rate(base_load(spec), float("inf"), opts.first_prompts)
        first = await bench.measure(load, Phase.of(PhaseKind.RATE, "inf"))
        if first.verdict.met:
            return Evaluated([first], 0)
        return await descent(bench, first, prompts=opts.descent_prompts, settle_s=opts.settle_s)

    return run


def utilizations(spec: SweepSpec) -> list[float]:
    """The probe's utilizations: the spec's own list when it names one, else 0.98..0.90."""
    if "gpu_memory_utilization" in spec.parameters:
        return [float(v) for v in spec.values("gpu_memory_utilization")]
    return spec.auto_tune.probe_values()


class AutoTune:
    """auto_tune.sh's procedure."""

    async def run(self, ctx: SweepContext) -> AsyncIterator[Decision]:
        """Probe the utilization, then every pair in the script's order."""
        spec = ctx.spec
        seqs, tokens = spec.values("max_num_seqs"), spec.values("max_num_batched_tokens")
        yield Planned(len(seqs) * len(tokens) + 1)
        util = await self._probe(
            ctx, {"max_num_seqs": seqs[-1], "max_num_batched_tokens": tokens[-1]}
        )
        yield Note(f"Using gpu_memory_utilization={util} to serve model.")
        plans = []
        for s in seqs:
            for t in tokens:
                choice: Choice = {
                    "gpu_memory_utilization": util,
                    "max_num_seqs": s,
                    "max_num_batched_tokens": t,
                }
                try:
                    flags = spec.base.flags_for(choice)
                except ValidationError as exc:
                    ctx.prune(choice, None, explain(exc), note=f"pair {s}x{t}")
                    continue
                plans.append(
                    TrialPlan(choice, flags, f"pair {s}x{t}", pair_procedure(spec), TrialKind.PAIR)
                )
        await ctx.run_batches(plans)

    async def _probe(self, ctx: SweepContext, largest: Choice) -> float:
        tried = utilizations(ctx.spec)
        for util in tried:
            choice: Choice = {"gpu_memory_utilization": util, **largest}
            note = f"probe gpu_memory_utilization={util}"
            try:
                flags = ctx.spec.base.flags_for(choice)
            except ValidationError as exc:
                ctx.prune(choice, None, explain(exc), note=note)
                continue
            outcome = await ctx.run_trial(TrialPlan(choice, flags, note, nothing, TrialKind.PROBE))
            if outcome.state is TrialState.UP:
                return util
        low = min(tried) if tried else 0.9
        raise SweepFailed(NO_UTILIZATION.format(low=low))
