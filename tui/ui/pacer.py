"""While a load runs, the console refreshes at a bounded rate (issue 23).

On a 2-core machine the console's own CPU competes with the server it measures. During a
load, a busy server's log lines, the telemetry samples and the load's progress each
repaint a panel; :class:`EventPacer` hands them to the screen in one batch per
``period_s`` instead (samples coalesced to the newest of each kind, everything else in
order). Between loads, and for anything that ends a load or changes a run, events go
through at once.
"""

from __future__ import annotations

from collections.abc import Callable

from tui.domain.events import LogLine
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics
from tui.domain.workload import LoadProgress
from tui.session.port import LoadFinished, SessionEvent, TelemetryStatus

LOAD_REFRESH_S = 0.5
"""The console's refresh period while a load runs (2 Hz): the panels' numbers change once
a second, the log tail is read by a person."""

_PACED = (LogLine, GpuSample, HostSample, ServerMetrics, TelemetryStatus, LoadProgress)
_LATEST_ONLY = (GpuSample, HostSample, ServerMetrics, TelemetryStatus)


class EventPacer:
    """Delivers session events at once, or in batches every ``period_s`` while a load runs.

    ``deliver`` gets each event; ``later(delay_s, callback)`` schedules the batch (the
    app's timer). A load runs from its first :class:`LoadProgress` to its
    :class:`LoadFinished`, which flushes the batch and goes through at once.
    """

    def __init__(
        self,
        deliver: Callable[[SessionEvent], None],
        later: Callable[[float, Callable[[], None]], object],
        period_s: float = LOAD_REFRESH_S,
    ) -> None:
        self._deliver = deliver
        self._later = later
        self._period = period_s
        self._loading = False
        self._held: list[SessionEvent] = []
        self._scheduled = False
        self.batches = 0
        """How many batches were delivered (what the refresh bound is measured by)."""

    def push(self, event: SessionEvent) -> None:
        """One event from the session, on the app's loop."""
        if isinstance(event, LoadProgress):
            self._loading = True
        if not self._loading or not isinstance(event, _PACED):
            if isinstance(event, LoadFinished):
                self._loading = False
            self.flush()
            self._deliver(event)
            return
        if isinstance(event, _LATEST_ONLY):  # only the newest of its kind matters
            self._held = [e for e in self._held if type(e) is not type(event)]
        self._held.append(event)
        if not self._scheduled:
            self._scheduled = True
            self._later(self._period, self._tick)

    def flush(self) -> None:
        """Deliver what is held, in order."""
        held, self._held = self._held, []
        if held:
            self.batches += 1
        for event in held:
            self._deliver(event)

    def _tick(self) -> None:
        self._scheduled = False
        self.flush()
