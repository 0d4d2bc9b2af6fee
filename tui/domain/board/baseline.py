"""The one baseline every delta and every flag diff on the board is measured against.

The operator pins one (``p`` in the console, ``--baseline`` headless; the console keeps the
pin beside the history, so a relaunch and ``vtc runs`` read the same one). Otherwise it is
the **first completed like-for-like load**: the earliest run whose load finished whole (not
cancelled, not partial: :mod:`.load_mark`) with the same model, workload and machine as the
board's newest load (a hand run's before a sweep trial's, so a sweep's probe of another
model never takes over an 8B board). So the newest run reads as the change: changed a flag,
restarted, loaded, its row shows the change against where the operator started (issue 29:
with the newest load as the default, the new run was its own baseline and the change showed
on the old run, sign reversed). A run without a load, a cancelled or partial load,
a sweep's probe (a further load on a trial's server: ``RunRecord.probe``) and another model
are never chosen automatically: a board with no such load has no baseline
and says so, rather than comparing every row with a launch run that has no numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tui.domain.board.identity import run_label, same_run
from tui.domain.board.load_mark import completed_load
from tui.domain.board.noise import like_for_like
from tui.domain.results import RunRecord

__all__ = [
    "NO_BASELINE",
    "Baseline",
    "BaselineReason",
    "choose_baseline",
    "current_session",
    "run_label",
    "same_run",
]


class BaselineReason(StrEnum):
    """Why this run is the baseline (the header says so)."""

    PINNED = "pinned"
    FIRST_LOAD = "first load"


NO_BASELINE = "no completed load yet: no baseline"


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
        """``vs #3 (pinned)``, ``vs #3 (first load)``: what a board header says."""
        return f"vs {self.label} ({self.reason.value})"


def current_session(runs: Sequence[RunRecord]) -> str | None:
    """The session of the newest run: "this session" for a board read after the fact."""
    return runs[-1].session if runs else None


def _anchor(runs: Sequence[RunRecord]) -> RunRecord | None:
    """The board's newest load: a hand run's when there is one, else a sweep trial's."""
    loaded = [r for r in runs if r.bench is not None and r.served and not r.probe]
    hand = [r for r in loaded if r.sweep is None]
    return (hand or loaded)[-1] if loaded else None


def choose_baseline(
    runs: Sequence[RunRecord], *, pinned: int | None = None, session: str | None = None
) -> Baseline | None:
    """The baseline among ``runs`` (oldest first); ``None`` when no load completed.

    ``pinned`` is a run id; when it is not among ``runs`` the default is used and ``note``
    says so. ``session``: the console's session (kept for the callers; the newest completed
    load decides whichever session it ran in).
    """
    del session
    note = ""
    if pinned is not None:
        chosen = next((r for r in runs if r.id == pinned), None)
        if chosen is not None:
            return Baseline(chosen, BaselineReason.PINNED)
        note = f"pinned run #{pinned} is not on the board"
    anchor = _anchor(runs)
    if anchor is None:
        return None
    for run in runs:  # oldest first: the first load of this workload
        if (
            run.served
            and not run.probe
            and completed_load(run)
            and run.flags.model == anchor.flags.model
            and like_for_like(run, anchor).ok
        ):
            return Baseline(run, BaselineReason.FIRST_LOAD, note)
    return None
