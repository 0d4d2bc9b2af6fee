"""Which fix ``f`` applies next, and when it must stop instead of looping.

``f`` takes the latest failed run's diagnosis and applies a fix, then restarts. Without a
memory of what was tried it can loop: the same cause, a fix, the same cause again, the same
fix again (seen: the KV case lowering ``gpu_memory_utilization`` step after step). So:

- a fix whose flags were already tried, and failed the same way, is skipped;
- when the latest failure is the same cause as the failure ``f`` just fixed (its run was
  made by applying one of that failure's fixes), ``f`` stops and says so: the fix did not
  help, and another of the same kind will not either. The operator picks from the card or
  edits the form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord, RunStatus


@dataclass(frozen=True)
class FixChoice:
    """What ``f`` does: apply ``fix`` from ``run``'s diagnosis, or say ``reason`` and stop."""

    run: RunRecord | None
    fix: Fix | None
    reason: str = ""


def _after(flags: ServeFlags, fix: Fix) -> ServeFlags | None:
    try:
        return flags.replace(**fix.set)
    except (VtcError, ValueError):  # a fix that no longer validates is not a candidate
        return None


def _failed_the_same_way(runs: Sequence[RunRecord], flags: ServeFlags, kind: str) -> bool:
    return any(
        r.status is RunStatus.FAILED
        and r.diagnosis is not None
        and r.diagnosis.kind == kind
        and r.flags == flags
        for r in runs
    )


def _made_by_a_fix_of(run: RunRecord, earlier: RunRecord) -> bool:
    diagnosis = earlier.diagnosis
    if diagnosis is None:
        return False
    return any(_after(earlier.flags, fix) == run.flags for fix in diagnosis.fixes)


def _previous_failure(runs: Sequence[RunRecord], index: int) -> RunRecord | None:
    for earlier in reversed(runs[:index]):
        if earlier.status is RunStatus.FAILED and earlier.diagnosis is not None:
            return earlier
    return None


def choose_fix(runs: Sequence[RunRecord]) -> FixChoice:
    """The fix ``f`` applies now, from the latest failed run, or why there is none."""
    index = next(
        (i for i in range(len(runs) - 1, -1, -1) if runs[i].status is RunStatus.FAILED), None
    )
    if index is None:
        return FixChoice(None, None, "No failed run on the board.")
    run = runs[index]
    diagnosis: Diagnosis | None = run.diagnosis
    if diagnosis is None or not diagnosis.fixes:
        why = diagnosis.summary if diagnosis else "no diagnosis"
        return FixChoice(run, None, f"Run {run.label} has no suggested fix: {why}")
    previous = _previous_failure(runs, index)
    if (
        previous is not None
        and previous.diagnosis is not None
        and previous.diagnosis.kind == diagnosis.kind
        and _made_by_a_fix_of(run, previous)
    ):
        return FixChoice(
            run,
            None,
            f"Run {run.label} applied a fix for {diagnosis.kind} and failed the same way: "
            "not applying another; pick a fix from its card or edit the form.",
        )
    for fix in diagnosis.fixes:
        after = _after(run.flags, fix)
        if after is not None and not _failed_the_same_way(runs, after, diagnosis.kind):
            return FixChoice(run, fix)
    return FixChoice(
        run, None, f"Every fix for run {run.label} was tried and failed the same way."
    )
