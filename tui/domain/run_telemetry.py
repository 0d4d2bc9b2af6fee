"""What one run keeps of the telemetry: its downsampled series and the server-side latency
of its load, ready for ``RunRecord.series`` and ``RunRecord.server_latency``.

The hub makes one per run when it launches (or takes over) a server and feeds it every
sample; the load's start and end bound the latency summary, which is the server's own
histograms' increase over exactly that span (``LatencyTracker`` without a window), so the
board compares it with the client's numbers of the same requests.
"""

from __future__ import annotations

from collections.abc import Collection

from tui.domain.history import DEFAULT_MAX_POINTS, SeriesRecorder
from tui.domain.quantiles import LatencyTracker
from tui.domain.telemetry import (
    GpuSample,
    SeriesPoint,
    ServerLatency,
    ServerMetrics,
    SourceStatus,
)


class RunTelemetry:
    """A run's series (from launch on) and its load's server-side latency.

    ``launched_t``: when the run was launched, on the samples' clock (monotonic seconds).
    """

    def __init__(self, launched_t: float, max_points: int = DEFAULT_MAX_POINTS) -> None:
        self._series = SeriesRecorder(launched_t, max_points)
        self._load: LatencyTracker | None = None
        self._last_ok: ServerMetrics | None = None

    def on_metrics(self, sample: ServerMetrics) -> None:
        """Feed a /metrics sample."""
        self._series.add_metrics(sample)
        if sample.status is not SourceStatus.OK or not sample.histograms:
            return
        self._last_ok = sample
        if self._load is not None:
            self._load.observe(sample.t, sample.histograms)

    def on_gpu(self, sample: GpuSample, server_indices: Collection[int] | None = None) -> None:
        """Feed a GPU sample (the server's GPUs when known)."""
        self._series.add_gpu(sample, server_indices)

    def load_started(self) -> None:
        """A load begins: its latency counts from the newest good scrape on."""
        self._load = LatencyTracker(window_s=None)
        if self._last_ok is not None:
            self._load.observe(self._last_ok.t, self._last_ok.histograms)

    def load_requests(self) -> float:
        """Requests the server has finished since the load began (its E2E histogram's
        increase; TTFT's where E2E is not exported); 0 while no load is tracked."""
        if self._load is None:
            return 0.0
        latency = self._load.latency()
        for quantiles in (latency.e2el, latency.ttft):
            if quantiles is not None and quantiles.count is not None:
                return quantiles.count
        return 0.0

    @property
    def load_tracked(self) -> bool:
        """True between :meth:`load_started` and :meth:`load_finished`."""
        return self._load is not None

    def load_finished(self, final: ServerMetrics | None = None) -> ServerLatency | None:
        """The load ended: its server-side latency (``None`` if no two scrapes bound it).

        ``final``: a scrape taken after the load's last response, when the caller has one
        (vLLM records a request's histograms as it finishes).
        """
        tracker, self._load = self._load, None
        if tracker is None:
            return None
        if final is not None and final.status is SourceStatus.OK and final.histograms:
            tracker.observe(final.t, final.histograms)
        latency = tracker.latency()
        has_data = any(
            q is not None and q.count
            for q in (latency.ttft, latency.itl, latency.e2el, latency.queue)
        )
        return latency if has_data else None

    def series(self) -> list[SeriesPoint]:
        """The run's downsampled series so far (bounded length)."""
        return self._series.points()
