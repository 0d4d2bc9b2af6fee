"""The trial loop every strategy shares: lanes, the journal, the budget, stopping, progress.

A strategy hands :class:`TrialPlan` s to :meth:`SweepContext.run_trials`; each plan is run
on the next free lane (one per GPU, so a batch runs in parallel), or replayed from the
journal when a previous run of the same sweep finished it. A plan's procedure measures the
trial's server through :class:`TrialBench`. Every finished trial is journaled and reported
(``emit``) as a :class:`~tui.domain.sweep.SweepStatus`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import SweepTag
from tui.domain.sweep.outcome import (
    KEPT_METRICS,
    Measurement,
    SweepState,
    SweepStatus,
    TrialOutcome,
    TrialState,
    best_trial,
)
from tui.domain.sweep.slo import objective_value
from tui.domain.sweep.spec import SweepSpec
from tui.domain.workload import LoadSpec
from tui.tune.journal import Journal
from tui.tune.lanes import Lane, LaneError, LaneInterrupted, LaneLost, LaneRefused, StartResult
from tui.tune.prune import Pruner
from tui.tune.space import Choice, describe, request_model

if TYPE_CHECKING:
    from tui.tune.twin import Twin

Clock = Callable[[], float]
REPEATED_FAILURES = 3
"""This many trials in a row that fail the same way (the same diagnosis kind), with no swept
parameter value all of them share, stop the sweep with the reason: the cause is then the
machine or the base command, not a parameter, and every further start would fail alike
(issue 17: pairs kept starting after four identical failures). A streak that shares a value
(a grid's ``gpu_memory_utilization=0.98`` row) is the parameter's doing: the sweep goes on."""


class SweepStopped(Exception):
    """The sweep was asked to stop (the operator, a quit): it resumes later."""


class BudgetSpent(Exception):
    """The sweep's budget (server starts or wall time) is spent."""


class SweepFailed(VtcError):
    """The sweep cannot go on (e.g. no utilization starts the server)."""


@dataclass
class Evaluated:
    """What a procedure measured, and which measurement stands for the trial."""

    measurements: list[Measurement] = field(default_factory=list)
    chosen: int | None = None


Procedure = Callable[["TrialBench"], Awaitable[Evaluated]]


async def nothing(bench: TrialBench) -> Evaluated:
    """A procedure that only starts the server (auto_tune's memory probe)."""
    return Evaluated()


@dataclass
class TrialPlan:
    """One server start and what to measure on it."""

    choice: Choice
    flags: ServeFlags
    note: str
    procedure: Procedure
    kind: str = "trial"

    def key(self) -> str:
        """Finds the trial again in the journal: its kind, note and exact argv."""
        text = json.dumps([self.kind, self.note, self.flags.to_argv()])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class TrialBench:
    """The trial's ready server, as its procedure measures it."""

    def __init__(self, ctx: SweepContext, lane: Lane, model: str | None) -> None:
        self._ctx, self._lane, self._model = ctx, lane, model

    async def measure(self, load: LoadSpec, phase: str) -> Measurement:
        """Run ``load``; its numbers, SLO verdict and objective. Raises ``LaneError``."""
        spec = self._ctx.spec
        if self._ctx.stop_requested:  # x between two loads of a trial: no further load
            raise SweepStopped()
        self._ctx.note_activity(f"{self._lane.name}: {phase} benchmark ({load.num_prompts})")
        run = await self._lane.bench(load, model=self._model, goodput=self._ctx.goodput)
        result = run.result
        if result.cancelled:
            raise LaneInterrupted("the load was cancelled")
        metrics = {k: float(v) for k in KEPT_METRICS if (v := result.metric(k)) is not None}
        return Measurement(
            phase=phase,
            load=load,
            metrics=metrics,
            prefix_hit_pct=run.prefix_hit_pct,
            verdict=spec.slo.verdict(result, run.prefix_hit_pct),
            objective=objective_value(spec.objective, result),
        )

    async def reset_prefix_cache(self) -> bool:
        """Empty the server's prefix cache (auto_tune.sh does it before each descent step)."""
        return await self._lane.reset_prefix_cache()


class SweepContext:
    """The state of one sweep run: its trials, lanes, journal, budget and progress."""

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
    ) -> None:
        if not lanes:
            raise ValueError("a sweep needs at least one lane")
        self.spec = spec
        self.sweep_id = spec.sweep_id()
        self.lanes = list(lanes)
        self.goodput = spec.goodput_slos()
        self.pruner = pruner
        self.twin = twin  # the twin-first strategy's twin (None: it builds the spec's own)
        self.planned: int | None = None
        self.best_override: TrialOutcome | None = None
        self.notes: list[str] = []
        self._journal = journal
        self._emit = emit
        self._clock = clock
        self._started = clock()
        self._baseline = baseline_run_id
        self._free: asyncio.Queue[Lane] = asyncio.Queue()
        for lane in self.lanes:
            self._free.put_nowait(lane)
        self._busy: dict[int, Lane] = {}  # by id: lanes need not be hashable
        self._outcomes: dict[int, TrialOutcome] = {}
        self._next_index = 1
        self._reserved = 0  # starts in flight, counted against the budget
        self._stop = False
        self._aborts: list[asyncio.Future[None]] = []
        self._resumed = 0
        self._resumed_s = 0.0
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
        return sum(1 for t in self._outcomes.values() if t.started) + self._reserved

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`request_stop` was called."""
        return self._stop

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
        return self._clock() - self._started + self._resumed_s

    # -- running trials -----------------------------------------------------------------------
    async def run_trials(self, plans: Sequence[TrialPlan]) -> list[TrialOutcome]:
        """Run ``plans`` on the free lanes (in parallel when there are several), in order.

        Raises :class:`SweepStopped` / :class:`BudgetSpent` once every started one ended.
        """
        indexed = [(self._take_index(), plan) for plan in plans]
        tasks = [asyncio.create_task(self._run(i, p)) for i, p in indexed]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [r for r in results if isinstance(r, TrialOutcome)]

    async def run_trial(self, plan: TrialPlan) -> TrialOutcome:
        """Run one plan (see :meth:`run_trials`)."""
        (outcome,) = await self.run_trials([plan])
        return outcome

    def prune(
        self, choice: Choice, flags: ServeFlags | None, reason: str, note: str = ""
    ) -> TrialOutcome:
        """Record a choice that will not be started, with why (never journaled: recomputed)."""
        outcome = TrialOutcome(
            index=self._take_index(),
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
        index = self._take_index() if index is None else index
        base: dict[str, Any] = {
            "index": index,
            "key": "",
            "note": plan.note,
            "params": plan.choice,
            "flags": plan.flags,
            "lane": lane.name,
            "predicted_by": label,
        }
        tag = SweepTag(sweep_id=self.sweep_id, trial=index, note=plan.note)
        start = await lane.start(plan.flags, tag)
        if not start.ok:
            outcome = TrialOutcome(
                **base,
                state=TrialState.FAILED_START,
                diagnosis=start.diagnosis,
                diagnosis_kind=start.diagnosis_kind,
            )
        else:
            outcome = await self._measure(plan, lane, base, None, self._clock())
            outcome = outcome.model_copy(update={"seconds": 0.0})  # virtual: no wall time
        self._finish(outcome)
        return outcome

    def request_stop(self) -> None:
        """Stop: cut the running trials short; they are not journaled and run again later."""
        if self._stop:
            return
        self._stop = True
        self._message = "stopping: cutting the running trial short"
        self.publish(SweepState.STOPPING)
        self._aborts = [asyncio.ensure_future(lane.abort()) for lane in list(self._busy.values())]

    def note_activity(self, message: str) -> None:
        """What the sweep is doing now (the progress line)."""
        self._message = message
        self.publish(SweepState.STOPPING if self._stop else SweepState.RUNNING)

    def _take_index(self) -> int:
        index = self._next_index
        self._next_index += 1
        return index

    async def _run(self, index: int, plan: TrialPlan) -> TrialOutcome:
        key = plan.key()
        done = self._journal.finished.get(key) if self._journal is not None else None
        if done is not None:
            self._resumed += 1
            self._resumed_s += done.seconds
            self._finish(done.model_copy(update={"index": index}))
            return self._outcomes[index]
        self.check()
        self._reserved += 1
        lane = await self._free.get()
        self._busy[id(lane)] = lane
        try:
            outcome = await self._on_lane(index, plan, key, lane)
            if outcome.state is TrialState.LOST:  # its node or worker died: once more
                self._reserved += 1
                self.planned = self.planned + 1 if self.planned is not None else None
                outcome = await self._on_lane(self._take_index(), plan, key, lane)
            return outcome
        finally:
            self._busy.pop(id(lane), None)
            try:  # before another trial takes the lane: a cluster's worker and GPUs go back
                # now, so a trial waiting for GPUs (a node was lost) never waits on an idle one
                await lane.release()
            finally:
                self._free.put_nowait(lane)

    async def _on_lane(self, index: int, plan: TrialPlan, key: str, lane: Lane) -> TrialOutcome:
        started_at = self._clock()
        base: dict[str, Any] = {
            "index": index,
            "key": key,
            "note": plan.note,
            "params": plan.choice,
            "flags": plan.flags,
            "lane": lane.name,
            "started": True,
            "started_at": datetime.now(UTC),
        }
        try:
            self.check(starts=False)  # its own start is already counted
            self.note_activity(f"{lane.name}: trial {index} starting: {plan.note}")
            tag = SweepTag(sweep_id=self.sweep_id, trial=index, note=plan.note)
            try:
                start = await lane.start(plan.flags, tag)
            except LaneInterrupted as exc:
                self._interrupted(exc)
            except LaneLost as exc:
                start = None
                outcome = self._lost(base, exc, None, started_at)
            except LaneRefused as exc:  # never started: the cluster cannot hold it
                start, outcome = None, _refused(base, exc)
            if self._stop:
                raise SweepStopped()
            if start is not None:  # where it ran, once placed (a wait for GPUs is not its time)
                started_at += start.waited_s
                base.update(_placed(lane.name, start, base["started_at"]))
            if start is not None and not start.ok:
                outcome = TrialOutcome(
                    **base,
                    state=TrialState.FAILED_START,
                    run_id=start.run_id,
                    diagnosis=start.diagnosis,
                    diagnosis_kind=start.diagnosis_kind,
                    seconds=self._clock() - started_at,
                )
            elif start is not None:
                outcome = await self._measure(plan, lane, base, start.run_id, started_at)
        finally:
            self._reserved -= 1
        outcome = outcome.model_copy(update={"ended_at": datetime.now(UTC)})
        if self._journal is not None and outcome.state not in (TrialState.LOST, TrialState.PRUNED):
            # before it is reported: a crash now keeps it (a lost trial runs again instead)
            await asyncio.to_thread(self._journal.record, outcome)
        self._finish(outcome)
        if plan.kind != "probe":  # a probe fails by design until a utilization fits
            self._count_repeats(outcome)
        return outcome

    def _lost(
        self, base: dict[str, Any], exc: LaneLost, run_id: int | None, t0: float
    ) -> TrialOutcome:
        """The trial's node or worker died under it: marked lost, naming the node."""
        self.notes.append(f"trial {base['index']} lost on {exc.node}: run once more")
        return TrialOutcome(
            **base,
            state=TrialState.LOST,
            run_id=run_id,
            diagnosis=exc.one_line(),
            seconds=self._clock() - t0,
        )

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

    async def _measure(
        self, plan: TrialPlan, lane: Lane, base: dict[str, Any], run_id: int | None, t0: float
    ) -> TrialOutcome:
        bench = TrialBench(self, lane, request_model(self.spec, plan.choice))
        try:
            evaluated = await plan.procedure(bench)
        except LaneInterrupted as exc:
            self._interrupted(exc)
        except LaneLost as exc:
            return self._lost(base, exc, run_id, t0)
        except LaneError as exc:
            if self._stop:
                raise SweepStopped() from exc
            return TrialOutcome(
                **base,
                state=TrialState.BENCH_FAILED,
                run_id=run_id,
                diagnosis=exc.one_line(),
                seconds=self._clock() - t0,
            )
        state = TrialState.MEASURED if evaluated.measurements else TrialState.UP
        return TrialOutcome(
            **base,
            state=state,
            run_id=run_id,
            measurements=evaluated.measurements,
            chosen=evaluated.chosen,
            seconds=self._clock() - t0,
        )

    def _interrupted(self, exc: LaneInterrupted) -> NoReturn:
        """A trial cut short from outside: the whole sweep stops (it resumes later)."""
        self._stop = True
        self._message = f"stopped: {exc.one_line()}"
        raise SweepStopped() from exc

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
            planned=self.planned,
            elapsed_s=self.elapsed(),
            eta_s=self._eta(trials),
            message=self._message if message is None else message,
            best=self.best_override or best_trial(trials),
            baseline_run_id=self._baseline,
            resumed=self._resumed,
            slo=self.spec.slo.describe(),
            notes=tuple(self.notes),
        )

    def publish(self, state: SweepState, message: str | None = None) -> None:
        """Send the status to the sweep's listener."""
        if self._emit is not None:
            self._emit(self.status(state, message))

    def _eta(self, trials: tuple[TrialOutcome, ...]) -> float | None:
        ran = [t.seconds for t in trials if t.started and t.seconds > 0]
        if self.planned is None or not ran:
            return None
        done = sum(1 for t in trials if t.state is not TrialState.PRUNED and not t.predicted)
        left = max(0, self.planned - done)
        return math.fsum(ran) / len(ran) * left / len(self.lanes)


def _placed(lane: str, start: StartResult, began: datetime) -> dict[str, Any]:
    """Where the trial ran and when it began there (after any wait for the cluster)."""
    return {
        "lane": lane,
        "placement": start.placement,
        "log_excerpt": start.log_excerpt,
        "started_at": began + timedelta(seconds=start.waited_s),
    }


def _refused(base: dict[str, Any], exc: LaneRefused) -> TrialOutcome:
    """A trial the cluster as it is now can never hold: not started, not journaled."""
    return TrialOutcome(
        **{**base, "started": False}, state=TrialState.PRUNED, diagnosis=exc.one_line()
    )


def _failure_kind(outcome: TrialOutcome) -> str:
    return outcome.diagnosis_kind or outcome.diagnosis or outcome.state.value


def _choice_items(outcome: TrialOutcome) -> set[tuple[str, str]]:
    """The trial's swept parameter values, comparable across trials."""
    return {(name, repr(value)) for name, value in outcome.params.items()}
