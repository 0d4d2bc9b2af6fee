"""The trial runner: plans on lanes, one trial per free lane, a lost trial run once more.

A strategy hands :class:`TrialPlan` s to the sweep context, which hands them here; each plan
is run on the next free lane (one per GPU, so a batch runs in parallel), or replayed from the
journal when a previous run of the same sweep finished it. A plan's procedure measures the
trial's server through :class:`TrialBench`. Every finished trial is journaled, then handed
back to the sweep (its :class:`TrialHost`), which counts and reports it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import NoReturn, Protocol

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import SweepTag
from tui.domain.sweep.outcome import (
    KEPT_METRICS,
    Measurement,
    Phase,
    Placement,
    TrialOutcome,
    TrialState,
)
from tui.domain.sweep.slo import objective_value
from tui.domain.sweep.spec import SweepSpec
from tui.domain.workload import LoadSpec
from tui.tune.journal import Journal
from tui.tune.lanes import Lane, LaneError, LaneInterrupted, LaneLost, LaneRefused, StartResult
from tui.tune.space import Choice, request_model
from tui.tune.stops import SweepStopped

Clock = Callable[[], float]


@dataclass
class Evaluated:
    """What a procedure measured, and which measurement stands for the trial."""

    measurements: list[Measurement] = field(default_factory=list)
    chosen: int | None = None


Procedure = Callable[["TrialBench"], Awaitable[Evaluated]]


async def nothing(bench: TrialBench) -> Evaluated:
    """A procedure that only starts the server (auto_tune's memory probe)."""
    return Evaluated()


class TrialKind(StrEnum):
    """Why a trial runs: the strategy step that planned it (its value keys the journal)."""

    TRIAL = "trial"
    GRID = "grid"
    SEARCH = "search"
    CONFIRM = "confirm"
    PAIR = "pair"
    PROBE = "probe"  # auto_tune's probe of a pair's limit: not counted as a measured trial
    TWIN = "twin"


@dataclass
class TrialPlan:
    """One server start and what to measure on it."""

    choice: Choice
    flags: ServeFlags
    note: str
    procedure: Procedure
    kind: TrialKind = TrialKind.TRIAL

    def key(self) -> str:
        """Finds the trial again in the journal: its kind, note and exact argv."""
        text = json.dumps([self.kind, self.note, self.flags.to_argv()])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TrialHead:
    """What is known of a trial before its end: which plan, on which lane, since when."""

    index: int
    key: str
    plan: TrialPlan
    lane: str
    started: bool = False
    started_at: datetime | None = None
    placement: Placement | None = None
    log_excerpt: str = ""
    predicted_by: str | None = None

    def ended(
        self,
        state: TrialState,
        *,
        run_id: int | None = None,
        diagnosis: str = "",
        diagnosis_kind: str | None = None,
        evaluated: Evaluated | None = None,
        seconds: float = 0.0,
    ) -> TrialOutcome:
        """The trial's outcome: this head and how it ended."""
        done = evaluated or Evaluated()
        return TrialOutcome(
            index=self.index,
            key=self.key,
            note=self.plan.note,
            params=self.plan.choice,
            flags=self.plan.flags,
            state=state,
            lane=self.lane,
            run_id=run_id,
            diagnosis=diagnosis,
            diagnosis_kind=diagnosis_kind,
            measurements=done.measurements,
            chosen=done.chosen,
            started=self.started,
            seconds=seconds,
            started_at=self.started_at,
            placement=self.placement,
            log_excerpt=self.log_excerpt,
            predicted_by=self.predicted_by,
        )


class TrialHost(Protocol):
    """The sweep a runner serves (:class:`~tui.tune.context.SweepContext`): its spec, its
    budget and stop, and where finished trials go."""

    @property
    def spec(self) -> SweepSpec:
        """The sweep's spec."""
        ...

    @property
    def sweep_id(self) -> str:
        """The sweep's id (the trials' tags)."""
        ...

    @property
    def goodput(self) -> Mapping[str, float]:
        """bench serve's ``--goodput`` thresholds for every load."""
        ...

    @property
    def stop_requested(self) -> bool:
        """Whether the sweep was asked to stop."""
        ...

    def check(self, *, starts: bool = True) -> None:
        """Raise when the sweep must end."""
        ...

    def note_activity(self, message: str) -> None:
        """What the sweep is doing now."""
        ...

    def take_index(self) -> int:
        """The next trial's index."""
        ...

    def finished(self, outcome: TrialOutcome, *, counted: bool) -> None:
        """A trial ended (``counted``: its failure counts toward repeated failures)."""
        ...

    def note(self, text: str) -> None:
        """A line for the sweep's notes."""
        ...

    def run_again(self) -> None:
        """A lost trial runs once more: one more trial than planned."""
        ...

    def interrupted(self, message: str) -> None:
        """A trial was cut short from outside: the whole sweep stops."""
        ...


class TrialBench:
    """The trial's ready server, as its procedure measures it."""

    def __init__(self, host: TrialHost, lane: Lane, model: str | None) -> None:
        self._host, self._lane, self._model = host, lane, model

    async def measure(self, load: LoadSpec, phase: Phase) -> Measurement:
        """Run ``load``; its numbers, SLO verdict and objective. Raises ``LaneError``."""
        spec = self._host.spec
        if self._host.stop_requested:  # x between two loads of a trial: no further load
            raise SweepStopped()
        self._host.note_activity(f"{self._lane.name}: {phase} benchmark ({load.num_prompts})")
        run = await self._lane.bench(load, model=self._model, goodput=self._host.goodput)
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


class TrialRunner:
    """Runs plans on a pool of lanes for one sweep: replays, starts, measures, journals."""

    def __init__(
        self, host: TrialHost, lanes: Sequence[Lane], journal: Journal | None, clock: Clock
    ) -> None:
        self._host, self._journal, self._clock = host, journal, clock
        self._free: asyncio.Queue[Lane] = asyncio.Queue()
        for lane in lanes:
            self._free.put_nowait(lane)
        self._busy: dict[int, Lane] = {}  # by id: lanes need not be hashable
        self.reserved = 0
        """Starts in flight, counted against the budget."""
        self.resumed = 0
        """Trials replayed from the journal."""
        self.resumed_s = 0.0
        """The seconds those replayed trials took when they ran."""

    async def run_all(self, indexed: Sequence[tuple[int, TrialPlan]]) -> list[TrialOutcome]:
        """Run ``(index, plan)`` s on the free lanes (in parallel when there are several)."""
        tasks = [asyncio.create_task(self._run(i, p)) for i, p in indexed]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [r for r in results if isinstance(r, TrialOutcome)]

    def abort(self) -> list[asyncio.Future[None]]:
        """Cut every running trial short (its lane aborts what it runs)."""
        return [asyncio.ensure_future(lane.abort()) for lane in list(self._busy.values())]

    async def predict(self, plan: TrialPlan, lane: Lane, label: str, index: int) -> TrialOutcome:
        """``plan`` on the twin's ``lane`` (a virtual clock): a predicted trial, no start."""
        head = TrialHead(index, "", plan, lane.name, predicted_by=label)
        tag = SweepTag(sweep_id=self._host.sweep_id, trial=index, note=plan.note)
        start = await lane.start(plan.flags, tag)
        if not start.ok:
            return head.ended(
                TrialState.FAILED_START,
                diagnosis=start.diagnosis,
                diagnosis_kind=start.diagnosis_kind,
            )
        outcome = await self._measure(head, lane, None, self._clock())
        return outcome.model_copy(update={"seconds": 0.0})  # virtual: no wall time

    async def _run(self, index: int, plan: TrialPlan) -> TrialOutcome:
        key = plan.key()
        done = self._journal.finished.get(key) if self._journal is not None else None
        if done is not None:
            self.resumed += 1
            self.resumed_s += done.seconds
            replayed = done.model_copy(update={"index": index})
            self._host.finished(replayed, counted=False)
            return replayed
        self._host.check()
        self.reserved += 1
        lane = await self._free.get()
        self._busy[id(lane)] = lane
        try:
            outcome = await self._on_lane(index, plan, key, lane)
            if outcome.state is TrialState.LOST:  # its node or worker died: once more
                self.reserved += 1
                self._host.run_again()
                outcome = await self._on_lane(self._host.take_index(), plan, key, lane)
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
        head = TrialHead(index, key, plan, lane.name, started=True, started_at=datetime.now(UTC))
        try:
            self._host.check(starts=False)  # its own start is already counted
            self._host.note_activity(f"{lane.name}: trial {index} starting: {plan.note}")
            tag = SweepTag(sweep_id=self._host.sweep_id, trial=index, note=plan.note)
            try:
                start = await lane.start(plan.flags, tag)
            except LaneInterrupted as exc:
                self._interrupted(exc)
            except LaneLost as exc:
                start = None
                outcome = self._lost(head, exc, None, started_at)
            except LaneRefused as exc:  # never started: the cluster as it is cannot hold it
                start = None
                outcome = dataclasses.replace(head, started=False).ended(
                    TrialState.PRUNED, diagnosis=exc.one_line()
                )
            if self._host.stop_requested:
                raise SweepStopped()
            if start is not None:  # where it ran, once placed (a wait for GPUs is not its time)
                started_at += start.waited_s
                head = _placed(head, lane.name, start)
            if start is not None and not start.ok:
                outcome = head.ended(
                    TrialState.FAILED_START,
                    run_id=start.run_id,
                    diagnosis=start.diagnosis,
                    diagnosis_kind=start.diagnosis_kind,
                    seconds=self._clock() - started_at,
                )
            elif start is not None:
                outcome = await self._measure(head, lane, start.run_id, started_at)
        finally:
            self.reserved -= 1
        outcome = outcome.model_copy(update={"ended_at": datetime.now(UTC)})
        if self._journal is not None and outcome.state not in (TrialState.LOST, TrialState.PRUNED):
            # before it is reported: a crash now keeps it (a lost trial runs again instead)
            await asyncio.to_thread(self._journal.record, outcome)
        # a probe fails by design until a utilization fits: not a repeated failure
        self._host.finished(outcome, counted=plan.kind is not TrialKind.PROBE)
        return outcome

    def _lost(self, head: TrialHead, exc: LaneLost, run_id: int | None, t0: float) -> TrialOutcome:
        """The trial's node or worker died under it: marked lost, naming the node."""
        self._host.note(f"trial {head.index} lost on {exc.node}: run once more")
        return head.ended(
            TrialState.LOST, run_id=run_id, diagnosis=exc.one_line(), seconds=self._clock() - t0
        )

    async def _measure(
        self, head: TrialHead, lane: Lane, run_id: int | None, t0: float
    ) -> TrialOutcome:
        plan = head.plan
        bench = TrialBench(self._host, lane, request_model(self._host.spec, plan.choice))
        try:
            evaluated = await plan.procedure(bench)
        except LaneInterrupted as exc:
            self._interrupted(exc)
        except LaneLost as exc:
            return self._lost(head, exc, run_id, t0)
        except LaneError as exc:
            if self._host.stop_requested:
                raise SweepStopped() from exc
            return head.ended(
                TrialState.BENCH_FAILED,
                run_id=run_id,
                diagnosis=exc.one_line(),
                seconds=self._clock() - t0,
            )
        state = TrialState.MEASURED if evaluated.measurements else TrialState.UP
        return head.ended(state, run_id=run_id, evaluated=evaluated, seconds=self._clock() - t0)

    def _interrupted(self, exc: LaneInterrupted) -> NoReturn:
        """A trial cut short from outside: the whole sweep stops (it resumes later)."""
        self._host.interrupted(f"stopped: {exc.one_line()}")
        raise SweepStopped() from exc


def _placed(head: TrialHead, lane: str, start: StartResult) -> TrialHead:
    """Where the trial ran and when it began there (after any wait for the cluster)."""
    began = head.started_at + timedelta(seconds=start.waited_s) if head.started_at else None
    return dataclasses.replace(
        head,
        lane=lane,
        placement=start.placement,
        log_excerpt=start.log_excerpt,
        started_at=began,
    )
