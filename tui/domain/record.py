"""A run record as a pure fold over what happened to it: ``apply(record, event) -> record``.

Everything that changes a run on the board goes through :func:`apply`, once: the server's
events (launched, stages, KV figures, ready, failed, exited), a load's result, and the ends
only the console can tell (a run replaced by the next, a run lost from sight), and what the
telemetry kept of the run (its series, its load's server-side latency). The session's run
book applies events and stores the result; the console's panels project the record.

``apply`` returns the very same object when an event changes nothing (a log line), so the
caller can skip the store write with an identity check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tui.domain.events import (
    Exited,
    Failed,
    KvCacheReported,
    Launched,
    LogLine,
    Ready,
    ServerEvent,
    StageReached,
)
from tui.domain.prediction import Prediction
from tui.domain.results import (
    BenchResult,
    Reproduction,
    RunRecord,
    RunStatus,
    SeriesPoint,
    ServerLatency,
    StageTiming,
    TelemetryPeaks,
)
from tui.domain.workload import LoadSpec


@dataclass(frozen=True)
class LoadRecorded:
    """A load ran against the run's server: its result and what was seen meanwhile."""

    result: BenchResult
    workload: LoadSpec
    peaks: TelemetryPeaks
    server_latency: ServerLatency | None = None
    prediction: Prediction | None = None  # the twin's, made before the load ran


@dataclass(frozen=True)
class RunEnded:
    """The console ended the run in a way the server cannot report.

    ``status`` is ``REPLACED`` (the next run took its place), ``LOST`` (the console lost
    sight of it without seeing it end) or ``STOPPED``; ``why`` is one line for the board.
    """

    status: RunStatus
    why: str = ""


@dataclass(frozen=True)
class Reproduced:
    """What it takes to run it again (argv, environment names, machine), read at launch."""

    repro: Reproduction


@dataclass(frozen=True)
class TelemetryRecorded:
    """What the telemetry kept of the run, recorded when a load ends and when the run ends.

    ``series``: the run's downsampled series so far (``None``: unchanged). ``server_latency``:
    the server's own latency histograms over the load that just ended (``None``: unchanged;
    a load ends by clearing the previous load's, see :class:`LoadRecorded`).
    ``load_cancelled``: that load was cancelled, so its latency is kept only where its
    partial bench is kept too (never beside a completed load's numbers).
    """

    series: Sequence[SeriesPoint] | None = None
    server_latency: ServerLatency | None = None
    load_cancelled: bool = False


RunEvent = ServerEvent | LoadRecorded | RunEnded | Reproduced | TelemetryRecorded
"""Everything that can change a run record."""


def apply(record: RunRecord, event: RunEvent) -> RunRecord:
    """``record`` after ``event`` (the same object when nothing changes)."""
    if isinstance(event, LogLine):
        return record
    if isinstance(event, LoadRecorded):
        return _load_recorded(record, event)
    if isinstance(event, RunEnded):
        return _ended(record, event)
    if isinstance(event, Reproduced):
        return record.model_copy(update={"repro": event.repro})
    if isinstance(event, TelemetryRecorded):
        return _telemetry_recorded(record, event)
    return _server_event(record, event)


def _server_event(record: RunRecord, event: ServerEvent) -> RunRecord:
    if isinstance(event, Launched):
        repro = (record.repro or Reproduction()).model_copy(update={"argv": list(event.argv)})
        return record.model_copy(
            update={"log_path": event.log_path, "repro": repro, "server_pid": event.pid}
        )
    if isinstance(event, StageReached):
        return _stage(record, event)
    if isinstance(event, KvCacheReported):
        startup = record.startup.model_copy(
            update={"kv_cache_tokens": event.tokens, "max_concurrency": event.max_concurrency}
        )
        return record.model_copy(update={"startup": startup})
    if isinstance(event, Ready):
        return _ready(record, event)
    if isinstance(event, Failed):
        return record.model_copy(
            update={
                "status": RunStatus.FAILED,
                "diagnosis": event.diagnosis,
                "exit_code": event.exit_code,
            }
        )
    if isinstance(event, Exited):
        return _exited(record, event)
    return record


def _stage(record: RunRecord, event: StageReached) -> RunRecord:
    stages = list(record.startup.stages)
    if stages and stages[-1].name == event.stage.value:
        # A later log line adds numbers to the stage it is in: the detail, not a new row.
        if not event.detail or event.detail == stages[-1].detail:
            return record
        stages[-1] = stages[-1].model_copy(update={"detail": event.detail})
    else:
        if stages and stages[-1].seconds is None:
            last = stages[-1]
            stages[-1] = last.model_copy(update={"seconds": event.elapsed - last.started_at})
        stages.append(
            StageTiming(name=event.stage.value, started_at=event.elapsed, detail=event.detail)
        )
    startup = record.startup.model_copy(update={"stages": stages})
    return record.model_copy(update={"startup": startup})


def _ready(record: RunRecord, event: Ready) -> RunRecord:
    changes: dict[str, object] = {}
    if event.timed:  # a server found running: its start was not watched from here
        changes["seconds_to_ready"] = event.elapsed
    if event.kv_cache_tokens is not None:
        changes["kv_cache_tokens"] = event.kv_cache_tokens
    if event.max_concurrency is not None:
        changes["max_concurrency"] = event.max_concurrency
    return record.model_copy(
        update={"status": RunStatus.READY, "startup": record.startup.model_copy(update=changes)}
    )


def _exited(record: RunRecord, event: Exited) -> RunRecord:
    status = record.status
    if status.live:
        # Its server is gone: the card must never go on saying READY (or offer a load).
        status = RunStatus.STOPPED
    return record.model_copy(update={"exit_code": event.exit_code, "status": status})


def _ended(record: RunRecord, event: RunEnded) -> RunRecord:
    if record.status is RunStatus.FAILED:
        return record  # the failure is what happened first; it stays the cause
    if event.status is RunStatus.REPLACED and record.status is RunStatus.STOPPED:
        pass  # stopped for the sake of the next run: say so
    elif not record.status.live:
        return record
    return record.model_copy(update={"status": event.status, "ended_because": event.why})


def _load_recorded(record: RunRecord, event: LoadRecorded) -> RunRecord:
    if record.bench is not None:
        # Nothing measured is ever overwritten: a further load is its own run
        # (RunRecord.another_load; the run book opens it).
        return record
    return record.model_copy(
        update={
            "bench": event.result,
            "workload": event.workload,
            "peaks": event.peaks,
            "server_latency": event.server_latency,
            "prediction": event.prediction,
        }
    )


def _telemetry_recorded(record: RunRecord, event: TelemetryRecorded) -> RunRecord:
    update: dict[str, object] = {}
    if event.series is not None and list(event.series) != record.series:
        update["series"] = list(event.series)
    latency = event.server_latency
    bench = record.bench
    # The same rule as _load_recorded: a cancelled load's numbers never sit beside (or
    # replace) a completed load's; the latency goes where that load's bench went.
    applies = not event.load_cancelled or bench is None or bench.cancelled
    if latency is not None and applies and latency != record.server_latency:
        update["server_latency"] = latency
    return record.model_copy(update=update) if update else record
