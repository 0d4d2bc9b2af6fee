"""What the main screen does with telemetry: the panels' marks, the header's simulator
label, the advice key and the history charts (kept here so the screen stays a router)."""

from __future__ import annotations

from tui.domain.diagnosis import Fix
from tui.domain.flags.serve import format_value
from tui.domain.freshness import Freshness
from tui.domain.telemetry import ServerMetrics, SourceStatus
from tui.session.port import SessionPort, TelemetryStatus
from tui.ui.screens.history import HistoryScreen
from tui.ui.widgets.gpu_panel import GpuPanel
from tui.ui.widgets.metrics_panel import MetricsPanel

NO_ADVICE = "No advice holds now: the server looks well used."


class TelemetryControl:
    """The newest ``TelemetryStatus`` and what the screen's keys do with it.

    ``live``: the console runs on a real clock (the history screen then refreshes itself).
    """

    def __init__(self, session: SessionPort, *, live: bool) -> None:
        self.status = TelemetryStatus(gpu=Freshness(SourceStatus.STALE, None))
        self._session = session
        self._live = live

    def show(self, status: TelemetryStatus, gpu: GpuPanel, metrics: MetricsPanel) -> None:
        """Ages, stale and down marks, the server's GPUs, the advice that holds now."""
        self.status = status
        gpu.fresh, gpu.server_gpus = status.gpu, status.server_gpus
        metrics.fresh, metrics.advice = status.metrics, status.advice

    def server_title(self, metrics: ServerMetrics) -> str | None:
        """The Server panel's title when a simulator's page says what it simulates and its
        time scale and the header does not say it yet (``None``: leave it)."""
        label = self._session.info.label
        if metrics.sim is None or metrics.sim.label in label:
            return None
        return f"Server · {label} · {metrics.sim.label}"

    def advice_fix(self) -> tuple[Fix, str] | None:
        """The first piece of advice that names flags, and what to tell the operator."""
        advice = next((a for a in self.status.advice if a.fix is not None), None)
        if advice is None or advice.fix is None:
            return None
        fix = advice.fix
        settings = ", ".join(f"{k}={format_value(v)}" for k, v in fix.set.items())
        restart = "r restarts with it." if self._session.can_restart else "(attached: no restart)"
        return fix, f"{fix.title}\n{settings}: {restart}"

    def history_screen(self, gpu: GpuPanel) -> HistoryScreen:
        """The last minutes of every chart, every GPU, the advice in full."""
        return HistoryScreen(
            self._session.history,
            gpu=gpu.sample,
            host=gpu.host,
            server_gpus=self.status.server_gpus,
            advice=self.status.advice,
            can_apply=self._session.can_restart,
            refresh_s=1.0 if self._live else None,
        )
