"""The one baseline every delta and every flag diff on the board is measured against.

The operator pins one (``p`` in the console, ``--baseline`` headless). Otherwise it is the
first served run of the current session: the first run of a session is usually the
starting point, and one that failed to start (seed 000's run 1 did) has no numbers to
compare with, so the first one that served stands in. A session with no served run yet
falls back to the newest served run before it, so a new session is still compared with
something the operator has seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tui.domain.results import RunRecord


class BaselineReason(StrEnum):
    """Why this run is the baseline (the header says so)."""

    PINNED = "pinned"
    FIRST_SERVED_THIS_SESSION = "first served run of this session"
    LATEST_SERVED_BEFORE = "newest served run of an earlier session"


@dataclass(frozen=True)
class Baseline:
    """The baseline run and why; ``note`` explains a pin that could not be honoured."""

    run: RunRecord
    reason: BaselineReason
    note: str = ""

    @property
    def label(self) -> str:
        """The baseline's label (``#3``)."""
        return run_label(self.run)

    def header(self) -> str:
        """``vs #3 (pinned)``: what a board header says."""
        return f"vs {self.label} ({self.reason.value})"


def run_label(run: RunRecord) -> str:
    """A run's label, ``#id`` when it has none."""
    return run.label or (f"#{run.id}" if run.id is not None else "(new)")


def same_run(a: RunRecord, b: RunRecord) -> bool:
    """Whether ``a`` and ``b`` are the same run (the same stored id, or the same object)."""
    return a is b or (a.id is not None and a.id == b.id)


def current_session(runs: Sequence[RunRecord]) -> str | None:
    """The session of the newest run: "this session" for a board read after the fact."""
    return runs[-1].session if runs else None


def choose_baseline(
    runs: Sequence[RunRecord], *, pinned: int | None = None, session: str | None = None
) -> Baseline | None:
    """The baseline among ``runs`` (oldest first); ``None`` when nothing has served.

    ``pinned`` is a run id; when it is not among ``runs`` the default is used and ``note``
    says so. ``session`` defaults to the newest run's (:func:`current_session`).
    """
    note = ""
    if pinned is not None:
        chosen = next((r for r in runs if r.id == pinned), None)
        if chosen is not None:
            return Baseline(chosen, BaselineReason.PINNED)
        note = f"pinned run #{pinned} is not on the board"
    if session is None:
        session = current_session(runs)
    this_session = next((r for r in runs if r.session == session and r.served), None)
    if this_session is not None:
        return Baseline(this_session, BaselineReason.FIRST_SERVED_THIS_SESSION, note)
    earlier = next((r for r in reversed(runs) if r.served), None)
    if earlier is not None:
        return Baseline(earlier, BaselineReason.LATEST_SERVED_BEFORE, note)
    return None
