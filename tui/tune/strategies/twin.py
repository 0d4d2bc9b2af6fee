"""Twin-first: rank the whole space on the twin, confirm the best on the real server.

1. **Prune** what cannot start (the flag rules, the pre-flight KV estimate), as the search.
2. **Rank on the twin.** Every candidate left runs on the twin (:mod:`tui.tune.twin`: the
   simulator's scheduler and memory plan on a virtual clock, seconds for the whole space)
   with the same procedure a real trial runs; each gives a *predicted* trial, shown as such
   and never the best.
3. **Confirm on the real server.** The best-ranked candidate (one per lane) is started for
   real and measured: the full benchmark (the SLO-bounded rate by bisection when it misses,
   per ``[search] rate_search``), then that load under ``confirm_seeds`` workload seeds,
   reported by the worst (the search's confirmation: like for like with any other
   strategy's confirmed best).
4. **Refit and re-rank.** The twin is fitted again with every real trial so far and the
   candidates not yet measured are predicted again (their rows updated in place).
5. **Stop** once the real best is confirmed: no candidate left could beat it by more than
   ``[twin] tolerance`` (2%: about a real measurement's own noise) even if the twin
   under-predicts it by its whole error, ``predicted * (1 + error) <= best * (1 +
   tolerance)``. The error is the larger of the twin's stated one (its profile's measured
   error) and the relative error of its last predictions against what the real server then
   measured (predictions of a fitted twin only: a cold twin's say nothing of the fitted
   one's); with neither known it does not stop. The figure is stated in the sweep's notes.
   Or the space, or the budget, is spent.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from tui.domain.flags.serve import ServeFlags
from tui.domain.sweep.outcome import Phase, PhaseKind, TrialOutcome, TrialState
from tui.domain.sweep.slo import OBJECTIVE_KEYS
from tui.domain.sweep.spec import SweepSpec
from tui.domain.workload import LoadSpec
from tui.store.profiles import load_profile
from tui.tune.context import (
    Evaluated,
    Procedure,
    SweepContext,
    SweepFailed,
    TrialBench,
    TrialKind,
    TrialPlan,
)
from tui.tune.decisions import Decision, Note, Planned
from tui.tune.prune import Pruner, explain
from tui.tune.space import Choice, base_load, describe, product, request_model
from tui.tune.strategies.rates import bisect, hold_under_seeds
from tui.tune.twin import Twin, TwinObservation, catalogue_twin
from tui.tune.twin_profile import ProfileTwin, cold_profile

MAX_CANDIDATES = 5_000
"""The most candidates a twin ranks (each is a few virtual-clock benchmarks)."""


@dataclass
class Candidate:
    """One combination: its flags, its predicted row, its real trial once measured."""

    choice: Choice
    flags: ServeFlags
    predicted: TrialOutcome | None = None
    real: TrialOutcome | None = None
    predicted_then: float | None = None  # the prediction the real trial was started on
    fitted_then: bool = False  # whether the twin that made it was fitted (its error counts)

    def contender(self, margin: float) -> bool:
        """Whether the twin leaves it a chance within ``margin``: it starts, and meets the
        SLOs or misses them by no more than the margin."""
        p = self.predicted
        if p is None or p.state is not TrialState.MEASURED or p.measurement is None:
            return False
        return p.slo_met or p.measurement.verdict.margin <= margin

    @property
    def value(self) -> float:
        """The predicted objective (0 without one)."""
        return (self.predicted.objective or 0.0) if self.predicted is not None else 0.0


def twin_of(ctx: SweepContext) -> Twin:
    """The context's twin (the composition root's), else the spec's ``[twin] profile`` (from
    the default data dir); else, for a server whose KV size is explicit (``--kv-cache-memory-
    bytes``: a CPU server), a cold profile of the base command, calibrated on the first real
    start; else the spec's catalogue GPU (hand-made), scaled to the real trials."""
    if ctx.twin is not None:
        return ctx.twin
    spec = ctx.spec
    key = OBJECTIVE_KEYS[spec.objective]
    base = spec.base.flags_for({})
    if spec.twin.profile is not None:
        return ProfileTwin(load_profile(spec.twin.profile), objective_key=key, model=base.model)
    if base.kv_cache_memory_bytes is not None:  # the KV capacity needs no calibration
        return ProfileTwin(cold_profile(base), objective_key=key)
    return catalogue_twin(spec.sim_gpu, spec.goodput_slos())


def trial_procedure(spec: SweepSpec) -> Procedure:
    """The full benchmark (bisected when it misses), then its load under every confirmation
    seed: the worst seed stands (the same on the twin and on the real server)."""
    opts = spec.search
    load = base_load(spec)

    async def run(bench: TrialBench) -> Evaluated:
        first = await bench.measure(load, Phase.of(PhaseKind.FULL))
        found = Evaluated([first], 0)
        if not first.verdict.met and opts.rate_search == "bisect":
            prompts = max(1, load.num_prompts // 4)
            found = await bisect(
                bench,
                first,
                short_prompts=prompts,
                full_prompts=load.num_prompts,
                steps=opts.bisect_steps,
            )
        chosen = found.measurements[found.chosen or 0]
        if not chosen.verdict.met:
            return found
        seeds = [chosen.load.seed + i for i in range(opts.confirm_seeds)]
        await bench.reset_prefix_cache()
        held = await hold_under_seeds(bench, chosen.load, seeds)
        offset = len(found.measurements)
        return Evaluated(found.measurements + held.measurements, offset + (held.chosen or 0))

    return run


CALIBRATE = PhaseKind.CALIBRATE.value
"""The phase prefix of the loads a cold twin is fitted on (on the first real start)."""


def with_calibration(procedure: Procedure, loads: Sequence[LoadSpec]) -> Procedure:
    """``loads`` first (the twin's calibration, on the same server), then ``procedure``."""
    if not loads:
        return procedure

    async def run(bench: TrialBench) -> Evaluated:
        out = []
        for i, load in enumerate(loads):
            out.append(await bench.measure(load, Phase.of(PhaseKind.CALIBRATE, i + 1)))
            await bench.reset_prefix_cache()
        rest = await procedure(bench)
        chosen = None if rest.chosen is None else len(out) + rest.chosen
        return Evaluated(out + rest.measurements, chosen)

    return run


class TwinFirst:
    """Predict every candidate on the twin, measure the best for real, refit, repeat."""

    async def run(self, ctx: SweepContext) -> AsyncIterator[Decision]:
        """Until the real best is confirmed within the twin's error, or nothing is left."""
        spec = ctx.spec
        twin = twin_of(ctx)
        candidates = await self._candidates(ctx, ctx.pruner or Pruner())
        yield Planned(None)  # the real starts it takes are not known before it measures
        procedure = trial_procedure(spec)
        yield Note(f"twin: {twin.label}; {len(candidates)} candidates ranked on it")
        recent: list[float] = []  # the last batch's prediction errors, out of sample
        await self._rank(ctx, twin, candidates, procedure)
        while True:
            left, why = self._next(ctx, twin, candidates, recent)
            if why:
                yield Note(why)
            if not left:
                return
            ctx.check()
            free = ctx.starts_left()
            width = ctx.width() if free is None else max(1, min(ctx.width(), free))
            batch = left[:width]
            first = with_calibration(procedure, twin.calibration_loads(base_load(spec)))
            plans = [self._plan(c, procedure if i else first) for i, c in enumerate(batch)]
            for c in batch:
                c.predicted_then, c.fitted_then = c.value, twin.fitted
            outcomes = await ctx.run_trials(plans)
            recent = [
                e
                for c, o in zip(batch, outcomes, strict=True)
                if (e := _learn(ctx, c, o)) is not None
            ]
            await twin.refit(_observations(spec, candidates))
            await self._rank(ctx, twin, [c for c in candidates if c.real is None], procedure)

    @staticmethod
    def _next(
        ctx: SweepContext, twin: Twin, candidates: Sequence[Candidate], recent: Sequence[float]
    ) -> tuple[list[Candidate], str]:
        """The candidates to measure next, best-ranked first; none once the best is confirmed
        (and the reason, for the sweep's notes; empty when there is none)."""
        tolerance = ctx.spec.twin.tolerance
        stated = twin.stated_error
        known = [*recent, *([] if stated is None else [stated])]
        error = max(known, default=0.0)  # none known yet: the twin cannot confirm anything
        best = _real_best(candidates)
        left = _ranked([c for c in candidates if c.real is None and c.contender(error)])
        if (
            best is not None
            and known
            and all(c.value * (1 + error) <= best * (1 + tolerance) for c in left)
        ):
            return [], _stop_note(best, left, error, tolerance, twin)
        if not left and best is None:  # the twin says nothing meets the SLOs: the nearest miss
            left = _closest([c for c in candidates if c.real is None])
        if not left:
            return [], "twin: every candidate it leaves a chance was measured"
        return left, ""

    @staticmethod
    def _plan(c: Candidate, procedure: Procedure) -> TrialPlan:
        return TrialPlan(c.choice, c.flags, describe(c.choice), procedure, TrialKind.TWIN)

    async def _candidates(self, ctx: SweepContext, pruner: Pruner) -> list[Candidate]:
        """Every combination the flag rules and the pre-flight estimate let start."""
        spec = ctx.spec
        if spec.space_size() > MAX_CANDIDATES:
            raise SweepFailed(
                f"the twin ranks at most {MAX_CANDIDATES:,} combinations; this space has "
                f"{spec.space_size():,}: use fewer values, or the search strategy"
            )
        out = []
        for choice in product(spec):
            try:
                flags = spec.base.flags_for(choice)
            except ValidationError as exc:
                ctx.prune(choice, None, explain(exc))
                continue
            reason = pruner.preflight(flags)
            if reason is not None:
                ctx.prune(choice, flags, reason)
                continue
            out.append(Candidate(choice, flags))
        if not out:
            raise SweepFailed("nothing in the space can start")
        return out

    async def _rank(
        self, ctx: SweepContext, twin: Twin, candidates: Sequence[Candidate], procedure: Procedure
    ) -> None:
        """Predict each candidate on the twin as it stands now (rows updated in place)."""
        lane = twin.lane()
        label = twin.label
        for c in candidates:
            ctx.note_activity(f"twin: predicting {describe(c.choice)}")
            row = c.predicted.index if c.predicted is not None else None
            plan = TrialPlan(c.choice, c.flags, describe(c.choice), procedure, TrialKind.TWIN)
            c.predicted = await ctx.predict(plan, lane, label, row)


def _ranked(candidates: list[Candidate]) -> list[Candidate]:
    """Predicted to meet the SLOs first, then by predicted objective, highest first."""
    return sorted(candidates, key=lambda c: (not _met(c), -c.value))


def _closest(candidates: list[Candidate]) -> list[Candidate]:
    """Those the twin starts, by how little it predicts they miss the SLOs."""
    started = [c for c in candidates if c.predicted is not None and c.predicted.measurement]
    return sorted(started, key=_violation)


def _violation(c: Candidate) -> float:
    m = c.predicted.measurement if c.predicted is not None else None
    return m.verdict.margin if m is not None else math.inf


def _met(c: Candidate) -> bool:
    return c.predicted is not None and c.predicted.slo_met


def _learn(ctx: SweepContext, c: Candidate, outcome: TrialOutcome) -> float | None:
    """Keep a real trial's outcome; the twin's error on it (``None``: not comparable)."""
    c.real = outcome
    if ctx.pruner is not None:
        ctx.pruner.learn(outcome)
    return _error(c.predicted_then, outcome) if c.fitted_then else None


def _real_best(candidates: Sequence[Candidate]) -> float | None:
    values = [c.real.objective or 0.0 for c in candidates if c.real is not None and c.real.slo_met]
    return max(values) if values else None


def _error(predicted: float | None, real: TrialOutcome) -> float | None:
    """The relative error of the objective the twin predicted before the real trial."""
    measured = real.objective
    if predicted is None or measured is None or real.state is not TrialState.MEASURED:
        return None
    if measured <= 0 or not math.isfinite(measured):
        return None
    return abs(predicted - measured) / measured


def _observations(spec: SweepSpec, candidates: Sequence[Candidate]) -> list[TwinObservation]:
    """Every full-length measurement of every real trial so far (each seed, each rate)."""
    out = []
    for c in candidates:
        trial = c.real
        if trial is None or trial.state is not TrialState.MEASURED:
            continue
        model = request_model(spec, c.choice)
        for m in trial.measurements:
            full = m.load.num_prompts == spec.workload.load.num_prompts
            if (full or m.phase.kind is PhaseKind.CALIBRATE) and m.metrics:
                out.append(TwinObservation(c.flags, m.load, dict(m.metrics), model))
    return out


def _stop_note(
    best: float, left: Sequence[Candidate], error: float, tolerance: float, twin: Twin
) -> str:
    nxt = max((c.value for c in left), default=None)
    after = (
        f"the next-ranked is predicted at {nxt:.1f}, at most {nxt * (1 + error):.1f} with "
        f"the twin's error of {100 * error:.1f}%"
        if nxt is not None
        else f"no candidate left meets the SLOs on the twin within its error of {100 * error:.1f}%"
    )
    return (
        f"twin: the real best {best:.1f} is confirmed ({after}; a gain under "
        f"{100 * tolerance:g}% is not worth a start); {twin.label}"
    )
