"""What a sweep produced: trials, their measurements, the best, and the status shown live."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from tui.domain.flags.serve import ServeFlags
from tui.domain.sweep.slo import SloVerdict
from tui.domain.sweep.tunables import Value
from tui.domain.workload import LoadSpec

# bench serve keys a trial keeps (the board keeps the whole result on the trial's run).
KEPT_METRICS = (
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "request_goodput",
    "completed",
    "failed",
    "duration",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p90_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p90_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p90_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p90_e2el_ms",
    "p99_e2el_ms",
)


class TrialState(StrEnum):
    """How a trial ended."""

    MEASURED = "measured"  # started and benchmarked
    UP = "up"  # started, nothing to measure (auto_tune's memory probe)
    FAILED_START = "failed_start"  # the server did not come up (the run has the diagnosis)
    BENCH_FAILED = "bench_failed"  # up, but the load could not be measured
    PRUNED = "pruned"  # never started: the flag rules, pre-flight or a learned failure region
    LOST = "lost"  # its node or worker died mid-trial (a cluster sweep): retried once elsewhere


class Placement(BaseModel):
    """Where a trial ran: the node, the GPUs it was given, what served and drove them.

    A cluster sweep records it on every trial, so a number is never read without where it
    came from (``gpu_model`` differs: the board does not call the difference a gain).
    """

    model_config = ConfigDict(frozen=True)

    node: str
    gpu_ids: list[str] = Field(default_factory=list)
    gpu_model: str | None = None
    vllm_version: str | None = None
    driver: str | None = None

    def describe(self) -> str:
        """``node-a gpu 0,1`` (``node-a`` without GPUs)."""
        return f"{self.node} gpu {','.join(self.gpu_ids)}" if self.gpu_ids else self.node


class PhaseKind(StrEnum):
    """What a benchmark of a trial measures."""

    FULL = "full"  # the whole load
    SHORT = "short"  # the search's short probe before a full run
    RATE = "rate"  # one request rate of an SLO-bounded rate search
    SEED = "seed"  # one seed of a confirmation
    CALIBRATE = "calibrate"  # one calibration load of the twin
    STEP = "step"  # a grid's workload record, by its name


class Phase(str):
    """A measurement's phase: its :class:`PhaseKind` and which one (``"rate 12"``,
    ``"seed 2"``; a grid step is its record's name). Stored as that text."""

    @classmethod
    def of(cls, kind: PhaseKind, which: object = "") -> Phase:
        """``kind``, then ``which`` when given (a rate, a seed, a calibration's number)."""
        return cls(f"{kind.value} {which}".strip() if kind is not PhaseKind.STEP else str(which))

    @property
    def kind(self) -> PhaseKind:
        """What it measures (a text that names no kind: a grid step)."""
        head = self.split(" ", 1)[0]
        return PhaseKind(head) if head in PhaseKind._value2member_map_ else PhaseKind.STEP

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema())


class Measurement(BaseModel):
    """One benchmark of a trial's server: the load, bench serve's numbers, the verdict."""

    model_config = ConfigDict(frozen=True)

    phase: Phase
    load: LoadSpec
    metrics: dict[str, float] = Field(default_factory=dict)
    prefix_hit_pct: float | None = None
    verdict: SloVerdict = Field(default_factory=lambda: SloVerdict(met=True))
    objective: float = 0.0

    @property
    def rate(self) -> str:
        """The request rate as bench serve prints it (``inf`` or a number)."""
        r = self.load.request_rate
        return "inf" if r == float("inf") else f"{r:g}"


class TrialOutcome(BaseModel):
    """One trial: the choice, the flags it made, how the start went, what was measured.

    ``chosen`` indexes the measurement that stands for the trial (the full run, the
    SLO-bounded rate, or the worst seed of a confirmation). ``started``: a server start was
    attempted (counted in the sweep's starts, failed ones included).
    """

    model_config = ConfigDict(frozen=True)

    index: int
    key: str
    note: str = ""
    params: dict[str, Value] = Field(default_factory=dict)
    flags: ServeFlags | None = None  # None: the flag rules refused the choice
    state: TrialState
    lane: str = ""
    run_id: int | None = None
    diagnosis: str = ""
    diagnosis_kind: str | None = None
    measurements: list[Measurement] = Field(default_factory=list)
    chosen: int | None = None
    started: bool = False
    seconds: float = 0.0
    started_at: datetime | None = None  # wall-clock start and end (UTC) of a started trial
    ended_at: datetime | None = None
    placement: Placement | None = None  # where it ran (a cluster sweep; ``None``: this machine)
    log_excerpt: str = ""  # the server log's last lines (a cluster sweep: the log is remote)
    predicted_by: str | None = None
    """The twin (its profile) whose virtual clock gave these numbers; ``None``: they were
    measured on a real server (or the simulator the sweep drives)."""

    @property
    def predicted(self) -> bool:
        """Whether the numbers are the twin's prediction, not a measurement."""
        return self.predicted_by is not None

    @property
    def source(self) -> str:
        """``predicted`` or ``measured``: what every shown number of the trial says."""
        return "predicted" if self.predicted else "measured"

    @property
    def measurement(self) -> Measurement | None:
        """The measurement that stands for the trial."""
        if self.chosen is None or not 0 <= self.chosen < len(self.measurements):
            return None
        return self.measurements[self.chosen]

    @property
    def slo_met(self) -> bool:
        """Whether the trial's measurement met every SLO (``False`` without one)."""
        m = self.measurement
        return m is not None and m.verdict.met

    @property
    def objective(self) -> float | None:
        """The objective of the trial's measurement."""
        m = self.measurement
        return m.objective if m is not None else None

    @property
    def metrics(self) -> dict[str, float]:
        """bench serve's numbers of the trial's measurement."""
        m = self.measurement
        return dict(m.metrics) if m is not None else {}

    @property
    def verdict_text(self) -> str:
        """``met``, ``missed: p99_e2el_ms 14000 > 13000``, ``failed start``, ``pruned: ...``
        (a prediction's begins ``predicted``)."""
        text = self._verdict()
        return f"predicted {text}" if self.predicted else text

    def _verdict(self) -> str:
        if self.state is TrialState.FAILED_START:
            return f"failed start: {self.diagnosis}" if self.diagnosis else "failed start"
        if self.state is TrialState.PRUNED:
            return f"pruned: {self.diagnosis}"
        if self.state is TrialState.UP:
            return "up"
        if self.state is TrialState.BENCH_FAILED:
            return f"no measurement: {self.diagnosis}"
        if self.state is TrialState.LOST:
            return f"lost: {self.diagnosis}" if self.diagnosis else "lost"
        m = self.measurement
        if m is None:
            return "no measurement"
        return "met" if m.verdict.met else "missed: " + "; ".join(m.verdict.violations)


def best_trial(trials: Sequence[TrialOutcome]) -> TrialOutcome | None:
    """The measured trial with the highest objective among those that met the SLOs.

    Ties go to the earlier trial (the order the strategy tried them in). A twin's
    prediction is never the best: only a measurement is.
    """
    best: TrialOutcome | None = None
    for trial in trials:
        if trial.state is not TrialState.MEASURED or not trial.slo_met or trial.predicted:
            continue
        value = trial.objective or 0.0
        if best is None or value > (best.objective or 0.0):
            best = trial
    return best


class SweepState(StrEnum):
    """Where a sweep stands."""

    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"  # by the operator, a quit, or a crash: it resumes
    DONE = "done"
    FAILED = "failed"  # could not go on (the message says why)


@dataclass(frozen=True)
class SweepStatus:
    """A sweep as the console and the headless progress show it, at one moment.

    ``planned``: how many trials the strategy expects (``None``: unknown); ``eta_s``: the
    time left at the mean trial time so far; ``best``: the best trial so far (a search's
    confirmation, reported by its worst seed, once it ran).
    """

    sweep_id: str
    name: str
    strategy: str
    objective: str
    state: SweepState
    trials: tuple[TrialOutcome, ...] = ()
    planned: int | None = None
    elapsed_s: float = 0.0
    eta_s: float | None = None
    message: str = ""
    best: TrialOutcome | None = None
    baseline_run_id: int | None = None
    resumed: int = 0  # trials taken from the journal instead of run again
    slo: str = ""  # the SLOs as the operator set them; "" when none were
    notes: tuple[str, ...] = field(default=())

    @property
    def starts(self) -> int:
        """Server starts attempted, failed ones included."""
        return sum(1 for t in self.trials if t.started)

    @property
    def failed_starts(self) -> int:
        """Starts that did not come up (a twin's "would not start" is no start)."""
        return sum(1 for t in self.trials if t.state is TrialState.FAILED_START and t.started)

    @property
    def done(self) -> int:
        """Trials finished (pruned ones included)."""
        return len(self.trials)

    @property
    def live(self) -> bool:
        """Whether it is still running (or stopping)."""
        return self.state in (SweepState.RUNNING, SweepState.STOPPING)
