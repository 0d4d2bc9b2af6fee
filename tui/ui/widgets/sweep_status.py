"""The sweep screen's head: strategy, state, progress, ETA, the best so far, what it does."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.domain.inert import inert
from tui.domain.sweep import SweepStatus
from tui.domain.sweep.slo import OBJECTIVE_UNITS


def _duration(seconds: float) -> str:
    s = int(max(0, seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def status_lines(status: SweepStatus | None) -> tuple[str, str]:
    """Two lines: the progress, then the best so far (or what the sweep does now)."""
    if status is None:
        return ("No sweep yet: compose one below, then g starts it.", "")
    planned = f"/{status.planned}" if status.planned else ""
    first = (
        f"{status.name} · {status.strategy} · {status.state.value} · "
        f"{status.done}{planned} trials · {status.starts} starts ({status.failed_starts} failed)"
    )
    if status.eta_s is not None and status.live:
        first += f" · ETA {_duration(status.eta_s)}"
    best = status.best
    unit = OBJECTIVE_UNITS.get(status.objective, "")
    if best is not None and best.objective is not None:
        run = f" run #{best.run_id}" if best.run_id is not None else ""
        verdict = "SLOs met" if best.slo_met else "SLOs missed"
        second = (
            f"best: trial {best.index}{run} {best.note}: {best.objective:.1f} {unit}, {verdict}"
        )
    else:
        second = f"best: none met the SLOs yet ({status.slo or 'no SLOs'})"
    if status.message:
        second += f" · {status.message}"
    return first, second


class SweepStatusLine(Static):
    """Progress, ETA and the best so far of the running or last sweep."""

    def show(self, status: SweepStatus | None) -> None:
        """Render ``status``."""
        first, second = status_lines(status)
        # Content, not markup: a status message may quote a server's error; escapes removed.
        self.update(Content(inert(f"{first}\n{second}", newlines=True)))
