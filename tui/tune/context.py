"""The state of one sweep: its trials, budget, stop, repeated failures and progress.

A strategy reads a :class:`SweepContext` (the spec, the trials so far, the starts left)
and hands it :class:`~tui.tune.trials.TrialPlan` s to run; the context's
:class:`~tui.tune.trials.TrialRunner` runs them on its lanes. What the strategy decides
besides trials (its plan's size, notes, the trial that stands) it yields as
:mod:`~tui.tune.decisions`, which the sweep run applies here. Every finished trial is
reported (``emit``) as a :class:`~tui.domain.sweep.SweepStatus`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tui.domain.flags.serve import ServeFlags
from tui.domain.sweep.outcome import SweepState, SweepStatus, TrialOutcome, TrialState, best_trial
from tui.domain.sweep.spec import SweepSpec
from tui.tune.decisions import Best, Decision, Note, Planned
from tui.tune.journal import Journal
from tui.tune.lanes import Lane, LaneCount
from tui.tune.prune import Pruner
from tui.tune.space import Choice, describe
from tui.tune.stops import BudgetSpent, SweepFailed, SweepStopped
from tui.tune.trials import (
    Clock,
    Evaluated,
    Procedure,
    TrialBench,
    TrialKind,
    TrialPlan,
    TrialRunner,
    nothing,
)

if TYPE_CHECKING:
    from tui.tune.twin import Twin

__all__ = [  # the names strategies import from here (re-exported: one import path)
    "BudgetSpent",
    "Clock",
    "Evaluated",
    "Procedure",
    "SweepContext",
    "SweepFailed",
    "SweepStopped",
    "TrialBench",
    "TrialKind",
    "TrialPlan",
    "nothing",
]

REPEATED_FAILURES = 3
"""This many trials in a row that fail the same way (the same diagnosis kind), with no swept
parameter value all of them share, stop the sweep with the reason: the cause is then the
machine or the base command, not a parameter, and every further start would fail alike
(issue 17: pairs kept starting after four identical failures). A streak that shares a value
(a grid's ``gpu_memory_utilization=0.98`` row) is the parameter's doing: the sweep goes on."""


class SweepContext:
    """The state of one sweep run: its trials, budget, stop and progress (one writer)."""

    def __init__(
        self,
        spec: SweepSpec,
        lanes: Sequence[Lane],
        journal: Journal | None = None,
        *,
        emit: Callable[[SweepStatus], None] | None = None,
        clock: Clock = time.monotonic,
        baseline_run_id: int | None = None,
        pruner: Pruner | None = None,
        max_repeated_failures: int = REPEATED_FAILURES,
        twin: Twin | None = None,
        count: LaneCount | None = None,
    ) -> None:
        if not lanes:
            raise ValueError("a sweep needs at least one lane")
        self.spec = spec
        self.sweep_id = spec.sweep_id()
        self.lanes = list(lanes)
        self._count = count  # a cluster's: how many of the lanes count now
        self.goodput = spec.goodput_slos()
        self.pruner = pruner
        self.twin = twin  # the twin-first strategy's twin (None: it builds the spec's own)
        self._planned: int | None = None
        self._best_override: TrialOutcome | None = None
        self._notes: list[str] = []
        self._emit = emit
        self._clock = clock
        self._started = clock()
        self._baseline = baseline_run_id
        self._runner = TrialRunner(self, self.lanes, journal, clock)
        self._outcomes: dict[int, TrialOutcome] = {}
        self._next_index = 1
        self._stop = False
        self._aborts: list[asyncio.Future[None]] = []
        self._message = ""
        self._max_repeats = max(1, max_repeated_failures)
        self._streak: list[TrialOutcome] = []  # the latest failures of one kind, in a row
        self._given_up: str | None = None  # why the sweep stopped on repeated failures

    # -- what strategies read -----------------------------------------------------------------
    @property
    def trials(self) -> list[TrialOutcome]:
        """Finished trials in index order."""
        return [self._outcomes[i] for i in sorted(self._outcomes)]

    @property
    def starts(self) -> int:
        """Server starts so far (resumed ones included), plus those in flight."""
        return sum(1 for t in self._outcomes.values() if t.started) + self._runner.reserved

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`request_stop` was called."""
        return self._stop

    @property
    def notes(self) -> tuple[str, ...]:
        """The sweep's notes so far."""
        return tuple(self._notes)

    def width(self) -> int:
        """How many trials to run at once now: every lane, or as many as the cluster holds
        now (its count follows nodes joining and leaving)."""
        wide = self._count.width() if self._count is not None else len(self.lanes)
        return max(1, min(len(self.lanes), wide))

    def starts_left(self) -> int | None:
        """Starts the budget still allows (``None``: unbounded)."""
        cap = self.spec.budget.max_starts
        return None if cap is None else max(0, cap - self.starts)

    def check(self, *, starts: bool = True) -> None:
        """Raise :class:`SweepStopped` or :class:`BudgetSpent` when the sweep must end
        (``starts``: the budget of starts counts too)."""
        if self._stop:
            raise SweepStopped()
        if self._given_up is not None:
            raise SweepFailed(self._given_up)
        wall = self.spec.budget.max_wall_s
        if wall is not None and self.elapsed() >= wall:
            raise BudgetSpent(f"wall-time budget of {wall:g} s spent")
        left = self.starts_left()
        if starts and left is not None and left <= 0:
            raise BudgetSpent(f"budget of {self.spec.budget.max_starts} starts spent")

    def elapsed(self) -> float:
        """Seconds this sweep has run, earlier runs of it (resumed trials) included."""
        return self._clock() - self._started + self._runner.resumed_s

    # -- what strategies ask for ----------------------------------------------------------------
    async def run_trials(self, plans: Sequence[TrialPlan]) -> list[TrialOutcome]:
        """Run ``plans`` on the free lanes (in parallel when there are several), in order.

        Raises :class:`SweepStopped` / :class:`BudgetSpent` once every started one ended.
        """
        return await self._runner.run_all([(self.take_index(), plan) for plan in plans])

    async def run_batches(self, plans: Sequence[TrialPlan]) -> None:
        """Run ``plans`` in batches as wide as :meth:`width` is when each batch begins."""
        done = 0
        while done < len(plans):
            width = self.width()
            await self.run_trials(plans[done : done + width])
            done += width

    async def run_trial(self, plan: TrialPlan) -> TrialOutcome:
        """Run one plan (see :meth:`run_trials`)."""
        (outcome,) = await self.run_trials([plan])
        return outcome

    def prune(
        self, choice: Choice, flags: ServeFlags | None, reason: str, note: str = ""
    ) -> TrialOutcome:
        """Record a choice that will not be started, with why (never journaled: recomputed)."""
        outcome = TrialOutcome(
            index=self.take_index(),
            key="",
            note=note or describe(choice),
            params=choice,
            flags=flags,
            state=TrialState.PRUNED,
            diagnosis=reason,
        )
        self._finish(outcome)
        return outcome

    async def predict(
        self, plan: TrialPlan, lane: Lane, label: str, index: int | None = None
    ) -> TrialOutcome:
        """``plan`` on the twin's ``lane`` (a virtual clock): a predicted trial, no start.

        Shown beside the measured trials, marked ``label`` (the twin it came from); never
        journaled (a resumed sweep predicts again from its replayed real trials), never
        counted as a start, never the best. ``index``: the row it replaces (a re-ranking
        updates each candidate's prediction in place).
        """
        self.check(starts=False)
        index = self.take_index() if index is None else index
        outcome = await self._runner.predict(plan, lane, label, index)
        self._finish(outcome)
        return outcome

    # -- what the sweep run, the service and the runner tell it ---------------------------------
    def apply(self, decision: Decision) -> None:
        """Apply what the strategy decided (the one place its decisions are written)."""
        if isinstance(decision, Planned):
            self._planned = decision.count
        elif isinstance(decision, Note):
            self._notes.append(decision.text)
        elif isinstance(decision, Best):
            self._best_override = decision.outcome

    def note(self, text: str) -> None:
        """A line for the sweep's notes (a lane's or the runner's)."""
        self._notes.append(text)

    def request_stop(self) -> None:
        """Stop: cut the running trials short; they are not journaled and run again later."""
        if self._stop:
            return
        self._stop = True
        self._message = "stopping: cutting the running trial short"
        self.publish(SweepState.STOPPING)
        self._aborts = self._runner.abort()

    def note_activity(self, message: str) -> None:
        """What the sweep is doing now (the progress line)."""
        self._message = message
        self.publish(SweepState.STOPPING if self._stop else SweepState.RUNNING)

    def take_index(self) -> int:
        """The next trial's index (a row of the board)."""
        index = self._next_index
        self._next_index += 1
        return index

    def finished(self, outcome: TrialOutcome, *, counted: bool) -> None:
        """A trial ended; ``counted``: its failure counts toward repeated failures."""
        self._finish(outcome)
        if counted:
            self._count_repeats(outcome)

    def run_again(self) -> None:
        """A lost trial runs once more: one more trial than planned."""
        self._planned = self._planned + 1 if self._planned is not None else None

    def interrupted(self, message: str) -> None:
        """A trial was cut short from outside: the whole sweep stops (it resumes later)."""
        self._stop = True
        self._message = message

    def _count_repeats(self, outcome: TrialOutcome) -> None:
        """Identical failures in a row: at the limit, no further trial starts (the reason)."""
        if outcome.state is TrialState.LOST:  # the cluster's doing, not the configuration's
            return
        if outcome.state not in (TrialState.FAILED_START, TrialState.BENCH_FAILED):
            self._streak = []
            return
        kind = _failure_kind(outcome)
        if self._streak and _failure_kind(self._streak[-1]) != kind:
            self._streak = []
        self._streak.append(outcome)
        count = len(self._streak)
        shared = set.intersection(*(_choice_items(t) for t in self._streak))
        if count >= self._max_repeats and not shared and self._given_up is None:
            self._given_up = (
                f"stopped: {count} trials in a row failed the same way ({kind}): "
                f"{outcome.diagnosis or outcome.state.value}; fix the cause, then resume"
            )
            raise SweepFailed(self._given_up)

    def _finish(self, outcome: TrialOutcome) -> None:
        self._outcomes[outcome.index] = outcome
        self.publish(SweepState.STOPPING if self._stop else SweepState.RUNNING)

    # -- progress ----------------------------------------------------------------------------
    def status(self, state: SweepState, message: str | None = None) -> SweepStatus:
        """The sweep as it stands, for the console and the headless progress."""
        trials = tuple(self.trials)
        return SweepStatus(
            sweep_id=self.sweep_id,
            name=self.spec.name,
            strategy=self.spec.strategy,
            objective=self.spec.objective,
            state=state,
            trials=trials,
            planned=self._planned,
            elapsed_s=self.elapsed(),
            eta_s=self._eta(trials),
            message=self._message if message is None else message,
            best=self._best_override or best_trial(trials),
            baseline_run_id=self._baseline,
            resumed=self._runner.resumed,
            slo="" if self.spec.slo.empty else self.spec.slo.describe(),  # "": no SLOs set
            notes=self.notes,
        )

    def publish(self, state: SweepState, message: str | None = None) -> None:
        """Send the status to the sweep's listener."""
        if self._emit is not None:
            self._emit(self.status(state, message))

    def _eta(self, trials: tuple[TrialOutcome, ...]) -> float | None:
        ran = [t.seconds for t in trials if t.started and t.seconds > 0]
        if self._planned is None or not ran:
            return None
        done = sum(1 for t in trials if t.state is not TrialState.PRUNED and not t.predicted)
        left = max(0, self._planned - done)
        working = self._count.working() if self._count is not None else len(self.lanes)
        return math.fsum(ran) / len(ran) * left / max(1, working)


def _failure_kind(outcome: TrialOutcome) -> str:
    return outcome.diagnosis_kind or outcome.diagnosis or outcome.state.value


def _choice_items(outcome: TrialOutcome) -> set[tuple[str, str]]:
    """The trial's swept parameter values, comparable across trials."""
    return {(name, repr(value)) for name, value in outcome.params.items()}
