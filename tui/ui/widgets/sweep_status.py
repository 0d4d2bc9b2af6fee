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


def progress_bar(done: int, planned: int | None, width: int) -> str:
    """``━━━━━━──────`` ``width`` cells wide (empty when the total is unknown)."""
    if not planned or width < 4:
        return ""
    filled = round(width * min(done, planned) / planned)
    return "━" * filled + "─" * (width - filled)


def best_text(status: SweepStatus) -> str:
    """``best 812.3 tok/s · SLOs met · trial 4 run #12`` (the unit always; the SLO verdict
    only when SLOs were set: without any, "none met the SLOs" read as a failure, issue 39)."""
    best = status.best
    unit = OBJECTIVE_UNITS.get(status.objective, "")
    if best is None or best.objective is None:
        if status.slo:
            return f"best: none met the SLOs yet ({status.slo})"
        return "best: no trial measured yet"
    run = f" run #{best.run_id}" if best.run_id is not None else ""
    verdict = (" · SLOs met" if best.slo_met else " · SLOs missed") if status.slo else ""
    return f"best {best.objective:.1f} {unit}{verdict} · trial {best.index}{run} {best.note}"


def status_lines(
    status: SweepStatus | None, width: int = 76, versus: str | None = None
) -> list[str]:
    """Progress (a bar, trials done of planned, ETA), the best so far with its unit and SLO
    verdict, then what the sweep is (name, strategy, state, starts) and its message; once it
    ended, ``versus`` (its best against the board's baseline,
    :func:`~tui.domain.sweep.versus.versus_baseline`) right under the progress. Each line
    whole (the widget wraps a long one rather than cutting it)."""
    if status is None:
        return ["No sweep yet: compose one below, then g starts it."]
    planned = f"/{status.planned}" if status.planned else ""
    count = f"{status.done}{planned} trials"
    eta = ""
    if status.eta_s is not None and status.live:
        eta = f" · ETA {_duration(status.eta_s)}"
    elif status.live:
        eta = f" · {_duration(status.elapsed_s)} so far"
    tail = f" {count}{eta} · {status.state.value}"
    bar = progress_bar(status.done, status.planned, min(30, width - len(tail) - 1))
    lines = [f"{bar}{tail}".strip()]
    if versus and not status.live:  # what the sweep ends on, before the details
        lines.append(versus)
    lines.append(best_text(status))
    about = (
        f"{status.name} · {status.strategy} · {status.starts} starts "
        f"({status.failed_starts} failed)"
    )
    lines.append(f"{about} · {status.message}" if status.message else about)
    return lines


class SweepStatusLine(Static):
    """Progress bar, ETA and the best so far of the running or last sweep."""

    def show(self, status: SweepStatus | None, versus: str | None = None) -> None:
        """Render ``status`` (``versus``: its best against the board's baseline)."""
        width = self.size.width or 76
        text = "\n".join(status_lines(status, width, versus))
        # Content, not markup: a status message may quote a server's error; escapes removed.
        self.update(Content(inert(text, newlines=True)))
