"""What each run keeps of the telemetry: its series from launch on, and its load's
server-side latency, recorded into the run through the run book's fold.

One :class:`~tui.domain.run_telemetry.RunTelemetry` per run, fed every sample while the
run is current. A load's latency is the server's own histograms' increase from the load's
start to a scrape that counts the load's finished requests: vLLM records a request's
histograms as it finishes, a moment after the client saw its last token, so the scrape
just before the load ended may miss the last ones. The hub's tick ends the wait after
``settle_s`` whatever the scrapes say (a server that stopped, a page without histograms).

Recorded as :class:`~tui.domain.record.TelemetryRecorded`: when a load's latency settles
(with the series so far) and when the run ends (the whole series).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from tui.domain.record import RunEvent, TelemetryRecorded
from tui.domain.results import BenchResult
from tui.domain.run_telemetry import RunTelemetry
from tui.domain.telemetry import GpuSample, ServerMetrics, SourceStatus

Record = Callable[[RunEvent, int | None], object]
"""The run book's ``apply(event, run_id)``."""


@dataclass(frozen=True)
class _Settling:
    """A finished load whose last requests the server may not have counted yet."""

    expected: float
    cancelled: bool
    deadline: float


class RunSeries:
    """The current run's telemetry; records it into the run through ``record``."""

    def __init__(self, record: Record, *, settle_s: float) -> None:
        self._record = record
        self._settle_s = settle_s
        self._run_id: int | None = None
        self._telemetry: RunTelemetry | None = None
        self._settling: _Settling | None = None

    @property
    def run_id(self) -> int | None:
        """The run being recorded (``None``: none)."""
        return self._run_id

    def begin(self, run_id: int | None, t: float) -> None:
        """Record ``run_id`` from ``t`` on (the previous run, if another, ends first)."""
        if run_id is not None and run_id == self._run_id:
            return
        self.end()
        if run_id is not None:
            self._run_id, self._telemetry = run_id, RunTelemetry(t)

    def on_metrics(self, sample: ServerMetrics) -> None:
        """A /metrics sample of the current run's server."""
        if self._telemetry is None:
            return
        self._telemetry.on_metrics(sample)
        settling = self._settling
        if (
            settling is not None
            and sample.status is SourceStatus.OK
            and self._telemetry.load_requests() >= settling.expected
        ):
            self._settle()

    def on_gpu(self, sample: GpuSample, server_indices: Collection[int] | None) -> None:
        """A GPU sample (averaged over the server's GPUs when they are known)."""
        if self._telemetry is not None:
            self._telemetry.on_gpu(sample, server_indices)

    def load_started(self) -> None:
        """A load begins on the current run (a load still settling is settled now)."""
        if self._settling is not None:
            self._settle()
        if self._telemetry is not None:
            self._telemetry.load_started()

    def load_finished(self, result: BenchResult | None, now: float) -> None:
        """The load ended (``None``: it failed with no result): wait for its last requests."""
        telemetry = self._telemetry
        if telemetry is None or not telemetry.load_tracked:
            return
        if result is None:
            telemetry.load_finished()  # nothing to compare it with
            return
        self._settling = _Settling(result.completed, result.cancelled, now + self._settle_s)

    def tick(self, now: float) -> None:
        """Once an interval: a load that waited long enough is settled with what it has."""
        if self._settling is not None and now >= self._settling.deadline:
            self._settle()

    def end(self) -> None:
        """The run ended (or is no longer watched): record its whole series."""
        telemetry, run_id = self._telemetry, self._run_id
        if telemetry is None:
            return
        if self._settling is not None:
            self._settle()
        self._telemetry = self._run_id = None
        self._record(TelemetryRecorded(series=telemetry.series()), run_id)

    def _settle(self) -> None:
        settling, self._settling = self._settling, None
        telemetry = self._telemetry
        if settling is None or telemetry is None:
            return
        latency = telemetry.load_finished()
        self._record(
            TelemetryRecorded(
                series=telemetry.series(),
                server_latency=latency,
                load_cancelled=settling.cancelled,
            ),
            self._run_id,
        )
