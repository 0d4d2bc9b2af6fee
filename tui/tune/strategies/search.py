"""The model-based search: fewer starts than a grid for (nearly) the same best.

1. **Prune before any start.** Every combination is checked against the flag rules and
   the pre-flight KV estimate (:mod:`tui.tune.prune`); what cannot start is never started.
2. **Optuna's TPE with constraints** proposes the next combinations (a batch per free GPU,
   with the constant liar so parallel suggestions differ). Ordered parameters are indexed,
   so TPE sees their order; flags and dtypes are categorical. A failed start, a pruned
   proposal or a missed SLO is an infeasible trial (its constraint > 0), so TPE learns
   which regions fail; a failed start also marks a memory region the pruner then skips.
3. **Successive halving within each start.** A trial first runs a short benchmark: at
   the incumbent's request rate once the SLOs bound one (can this configuration hold it
   within the SLOs?), else at the workload's rate. Only a promising one runs the full
   benchmark (and, if that misses the SLOs, the SLO-bounded rate by bisection, above the
   rate it already held): one that held the incumbent's rate within the SLOs, or, before
   such an incumbent, one within the SLOs near the best, or one over them within
   ``promote_within`` of the best short result.
4. **Stop** after ``patience`` starts without a better short result, when the feasible
   space is exhausted, or when the budget (one start kept back) is spent.
5. **Confirm.** The best full result is started again and measured under ``confirm_seeds``
   workload seeds; it is reported by its worst seed (SCOOT's robust re-run). A seed that
   misses the SLOs at the trial's rate lowers it (full runs, at most 25% lower) to one
   every seed holds; if none is found, the next best is confirmed while the budget lasts.
"""

from __future__ import annotations

import asyncio
import math
import random
import warnings
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import optuna
from pydantic import ValidationError

from tui.domain.flags.serve import ServeFlags
from tui.domain.sweep.outcome import Measurement, Phase, PhaseKind, TrialOutcome, TrialState
from tui.domain.sweep.spec import SweepSpec
from tui.domain.sweep.tunables import Value
from tui.domain.workload import LoadSpec
from tui.tune.context import (
    BudgetSpent,
    Evaluated,
    Procedure,
    SweepContext,
    SweepFailed,
    TrialBench,
    TrialKind,
    TrialPlan,
)
from tui.tune.decisions import Best, Decision, Note, Planned
from tui.tune.prune import Pruner, explain
from tui.tune.space import Choice, base_load, describe, product
from tui.tune.strategies.rates import at_rate, bisect, hold_under_seeds

ENUMERATE_LIMIT = 20_000  # larger spaces are pruned lazily, proposal by proposal
MAX_STALE_ASKS = 40  # proposals in a row that add nothing before one is drawn at random
CONFIRM_TRIES = 3


def _key(choice: Choice) -> tuple[tuple[str, str], ...]:
    return tuple((k, repr(v)) for k, v in sorted(choice.items()))


@dataclass
class Axis:
    """One parameter as TPE sees it: an index over ordered numbers, or categories."""

    name: str
    values: tuple[Value, ...]
    ordinal: bool

    def distribution(self) -> optuna.distributions.BaseDistribution:
        """An ``IntDistribution`` over the index, or a ``CategoricalDistribution``."""
        if self.ordinal:
            return optuna.distributions.IntDistribution(0, len(self.values) - 1)
        return optuna.distributions.CategoricalDistribution(list(self.values))

    def decode(self, raw: object) -> Value:
        """The value a suggestion names."""
        return self.values[int(raw)] if self.ordinal else raw  # type: ignore[return-value,call-overload]

    def encode(self, value: Value) -> object:
        """The suggestion that names ``value``."""
        return self.values.index(value) if self.ordinal else value


def axes(spec: SweepSpec) -> list[Axis]:
    """The spec's parameters as TPE axes (numbers sorted ascending, so indices are ordered)."""
    out = []
    for name in spec.parameters:
        values = spec.values(name)
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        if numeric and len(values) > 2:
            out.append(Axis(name, tuple(sorted(values, key=float)), True))
        else:
            out.append(Axis(name, values, False))
    return out


@dataclass
class Ledger:
    """What the search knows about each combination so far."""

    values: dict[tuple[tuple[str, str], ...], tuple[float, float]] = field(default_factory=dict)
    pruned: dict[str, int] = field(default_factory=dict)
    best_short: float = 0.0
    shorts: int = 0
    best_feasible: float = 0.0
    """The best objective a full benchmark measured within the SLOs (the incumbent)."""
    best_rate: float | None = None
    """The incumbent's request rate when the SLOs bound it (``None``: none, or ``inf``)."""

    def promising(self, short: Measurement, keep: float, at_incumbent: bool) -> bool:
        """Whether a short result earns the full benchmark (successive halving)."""
        if at_incumbent:  # can it hold the incumbent's rate within the SLOs? (a short run's
            # objective at a finite rate is lower than a full one's: ramp and tail weigh more)
            return short.verdict.met
        if short.verdict.met:  # a lower bound of its SLO-bounded objective
            return short.objective >= keep * self.best_feasible
        # over the SLOs at the workload's rate: an upper bound only, vs the other shorts
        return self.shorts < 2 or short.objective >= keep * self.best_short

    def incumbent(self, chosen: Measurement) -> None:
        """Keep ``chosen`` as the incumbent when it met the SLOs better than the last."""
        if chosen.verdict.met and chosen.objective > self.best_feasible:
            self.best_feasible = chosen.objective
            rate = chosen.load.request_rate
            self.best_rate = rate if math.isfinite(rate) else None

    def count(self, why: str) -> None:
        """One more combination pruned for ``why``'s source."""
        source = why.split(":")[0].split(" (")[0]
        self.pruned[source] = self.pruned.get(source, 0) + 1


class Search:
    """Pre-flight pruning, TPE with constraints, halving within starts, a robust confirm."""

    async def run(self, ctx: SweepContext) -> AsyncIterator[Decision]:
        """Search until patience, exhaustion or the budget; then confirm the best."""
        spec = ctx.spec
        pruner = ctx.pruner or Pruner()
        ledger = Ledger()
        feasible = await self._enumerate(ctx, pruner, ledger)
        cap = spec.budget.max_starts
        yield Planned(min(len(feasible), cap - 1 if cap else len(feasible)) + 1)
        try:
            await self._explore(ctx, pruner, ledger, feasible)
        except BudgetSpent:
            if ctx.stop_requested:
                raise
        yield Note(_pruned_note(ledger))
        async for decision in self._confirm(ctx, ctx.width()):
            yield decision

    async def _enumerate(self, ctx: SweepContext, pruner: Pruner, ledger: Ledger) -> list[Choice]:
        """Every combination that may start (the flag rules and pre-flight say so)."""
        spec = ctx.spec
        if spec.space_size() > ENUMERATE_LIMIT:
            return []
        feasible = []
        for choice in product(spec):
            reason = await _reason(ctx, pruner, choice)
            if reason is None:
                feasible.append(choice)
            else:
                ledger.count(reason)
        if not feasible:
            raise SweepFailed(f"nothing in the space can start ({_pruned_note(ledger)})")
        return feasible

    async def _explore(
        self, ctx: SweepContext, pruner: Pruner, ledger: Ledger, feasible: Sequence[Choice]
    ) -> None:
        spec, opts = ctx.spec, ctx.spec.search
        space = axes(spec)
        study = _study(opts.seed, opts.startup_trials)
        rng = random.Random(opts.seed)
        since_better, best, started = 0, -math.inf, 0
        procedure = search_procedure(spec, ledger)
        while True:
            left = ctx.starts_left()
            if left is not None and left <= 1:  # one start is kept for the confirmation
                return
            ctx.check()
            if since_better >= opts.patience and started >= opts.startup_trials + opts.patience:
                return  # TPE had ``patience`` guided starts and none improved
            unseen = [c for c in feasible if _key(c) not in ledger.values]
            if feasible and not unseen:
                return
            width = min(ctx.width(), left - 1) if left is not None else ctx.width()
            batch = await self._propose(ctx, study, space, pruner, ledger, unseen, rng, width)
            if not batch:
                return
            plans = [TrialPlan(c, f, describe(c), procedure, TrialKind.SEARCH) for _, c, f in batch]
            outcomes = await ctx.run_trials(plans)
            for (trial, choice, _), outcome in zip(batch, outcomes, strict=True):
                started += 1
                pruner.learn(outcome)
                value, constraint = _score(outcome)
                ledger.values[_key(choice)] = (value, constraint)
                _tell(study, trial, value, constraint)
                if constraint <= 0 and value > best * (1 + 1e-3):
                    best, since_better = value, 0
                else:
                    since_better += 1

    async def _propose(
        self,
        ctx: SweepContext,
        study: optuna.Study,
        space: list[Axis],
        pruner: Pruner,
        ledger: Ledger,
        unseen: list[Choice],
        rng: random.Random,
        width: int,
    ) -> list[tuple[optuna.trial.Trial, Choice, ServeFlags]]:
        """Up to ``width`` new combinations that may start; known or pruned ones are told."""
        batch: list[tuple[optuna.trial.Trial, Choice, ServeFlags]] = []
        stale = 0
        taken: set[tuple[tuple[str, str], ...]] = set()
        while len(batch) < width:
            if stale >= MAX_STALE_ASKS:
                fresh = [c for c in unseen if _key(c) not in taken]
                if not fresh:
                    break
                pick = rng.choice(fresh)
                study.enqueue_trial({a.name: a.encode(pick[a.name]) for a in space})
                stale = 0
            trial = study.ask({a.name: a.distribution() for a in space})
            choice = {a.name: a.decode(trial.params[a.name]) for a in space}
            key = _key(choice)
            if key in ledger.values:
                _tell(study, trial, *ledger.values[key])
                stale += 1
                continue
            if key in taken:
                _tell(study, trial, 0.0, 1.0)
                stale += 1
                continue
            reason = pruner.learned(choice) or await _reason(ctx, pruner, choice)
            if reason is not None:
                ledger.values[key] = (0.0, 1.0)
                ledger.count(reason)
                _tell(study, trial, 0.0, 1.0)
                stale += 1
                continue
            taken.add(key)
            batch.append((trial, choice, ctx.spec.base.flags_for(choice)))
        return batch

    async def _confirm(self, ctx: SweepContext, width: int) -> AsyncIterator[Decision]:
        """Re-run the best full results under several seeds; report the worst seed."""
        ranked = sorted(
            (t for t in ctx.trials if _full_met(t)), key=lambda t: -(t.objective or 0.0)
        )
        if not ranked:
            yield Note("no configuration met the SLOs in a full benchmark")
            return
        for trial in ranked[:CONFIRM_TRIES]:
            left = ctx.starts_left()
            if left is not None and left <= 0:
                yield Note("no start left to confirm the best under several seeds")
                return
            assert trial.flags is not None
            plan = TrialPlan(
                dict(trial.params),
                trial.flags,
                f"confirm {describe(trial.params)}",
                confirm_procedure(ctx.spec, trial),
                TrialKind.CONFIRM,
            )
            outcome = await ctx.run_trial(plan)
            yield Best(outcome)
            if outcome.slo_met:
                return


def _full_met(trial: TrialOutcome) -> bool:
    m = trial.measurement
    return (
        trial.state is TrialState.MEASURED
        and m is not None
        and m.verdict.met
        and m.phase.kind is not PhaseKind.SHORT
    )


async def _reason(ctx: SweepContext, pruner: Pruner, choice: Choice) -> str | None:
    """Why ``choice`` cannot start: the flag rules, then the KV estimate (in a thread)."""
    try:
        flags = ctx.spec.base.flags_for(choice)
    except ValidationError as exc:
        return explain(exc)
    return await asyncio.to_thread(pruner.preflight, flags)


def _study(seed: int, startup: int) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():  # constraints_func/constant_liar are marked experimental
        warnings.simplefilter("ignore")
        sampler = optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=startup,
            multivariate=True,
            constant_liar=True,
            constraints_func=lambda t: t.user_attrs.get("constraint", (1.0,)),
        )
    return optuna.create_study(direction="maximize", sampler=sampler)


def _tell(study: optuna.Study, trial: optuna.trial.Trial, value: float, constraint: float) -> None:
    trial.set_user_attr("constraint", (constraint,))
    study.tell(trial, value)


def _score(outcome: TrialOutcome) -> tuple[float, float]:
    """(objective, constraint) for TPE: > 0 constraint is infeasible.

    Within the SLOs, the objective its measurement met them with (the SLO-bounded rate's
    when the rate was cut), so TPE learns what the sweep maximises; over them, the short
    benchmark's objective with the violation as the constraint.
    """
    if outcome.state is not TrialState.MEASURED or not outcome.measurements:
        return 0.0, 1.0
    short = outcome.measurements[0]
    chosen = outcome.measurement
    margin = chosen.verdict.margin if chosen else short.verdict.margin
    constraint = min(max(margin, -1.0), 10.0) if math.isfinite(margin) else 10.0
    if outcome.slo_met and chosen is not None:
        return chosen.objective, min(constraint, 0.0)
    return short.objective, constraint


def _pruned_note(ledger: Ledger) -> str:
    if not ledger.pruned:
        return "nothing pruned"
    parts = ", ".join(f"{n} by {source}" for source, n in sorted(ledger.pruned.items()))
    return f"pruned before any start: {parts}"


def short_prompts(spec: SweepSpec) -> int:
    """The prompts of a short benchmark: a fraction of the full one, at least the minimum."""
    full = spec.workload.load.num_prompts
    return min(
        full, max(spec.search.min_short_prompts, math.ceil(full * spec.search.short_fraction))
    )


def search_procedure(spec: SweepSpec, ledger: Ledger) -> Procedure:
    """Short first; full (and the SLO-bounded rate) only when promising."""
    opts = spec.search
    full_load = base_load(spec)
    short_load = at_rate(full_load, full_load.request_rate, short_prompts(spec))

    async def run(bench: TrialBench) -> Evaluated:
        if short_load == full_load:  # too few prompts to halve: one full benchmark
            return await _full_only(bench, full_load, opts.rate_search, opts.bisect_steps)
        rate = ledger.best_rate
        probe = short_load if rate is None else at_rate(short_load, rate, short_load.num_prompts)
        short = await bench.measure(probe, Phase.of(PhaseKind.SHORT))
        out: list[Measurement] = [short]
        promising = ledger.promising(short, 1 - opts.promote_within, rate is not None)
        ledger.shorts += 1
        ledger.best_short = max(ledger.best_short, short.objective)
        if not promising:
            return Evaluated(out, 0)
        await bench.reset_prefix_cache()
        full = await bench.measure(full_load, Phase.of(PhaseKind.FULL))
        out.append(full)
        if full.verdict.met or opts.rate_search != "bisect":
            evaluated = Evaluated(out, 1)
        else:
            more = await bisect(
                bench,
                full,
                short_prompts=short_load.num_prompts,
                full_prompts=full_load.num_prompts,
                steps=opts.bisect_steps,
                floor=rate if rate is not None and short.verdict.met else 0.0,
            )
            evaluated = Evaluated(out + more.measurements[1:], 1 + (more.chosen or 0))
        ledger.incumbent(evaluated.measurements[evaluated.chosen or 0])
        return evaluated

    return run


async def _full_only(bench: TrialBench, load: LoadSpec, policy: str, steps: int) -> Evaluated:
    full = await bench.measure(load, Phase.of(PhaseKind.FULL))
    if full.verdict.met or policy != "bisect":
        return Evaluated([full], 0)
    prompts = max(1, load.num_prompts // 4)
    return await bisect(
        bench, full, short_prompts=prompts, full_prompts=load.num_prompts, steps=steps
    )


def confirm_procedure(spec: SweepSpec, trial: TrialOutcome) -> Procedure:
    """The trial's chosen load under ``confirm_seeds`` seeds, at a rate every seed holds
    within the SLOs; the worst seed stands for it (see :func:`hold_under_seeds`)."""
    chosen = trial.measurement
    load = chosen.load if chosen is not None else base_load(spec)
    seeds = [load.seed + i for i in range(spec.search.confirm_seeds)]

    async def run(bench: TrialBench) -> Evaluated:
        return await hold_under_seeds(bench, load, seeds)

    return run
