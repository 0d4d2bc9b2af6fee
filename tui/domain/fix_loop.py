"""Which fix ``f`` applies next, and when it must stop instead of looping.

``f`` takes the latest failed run's diagnosis and applies a fix, then restarts. Without a
memory of what was tried it can loop: the same cause, a fix, the same cause again, the same
fix again (seen: the KV case lowering ``gpu_memory_utilization`` step after step). Nor may it
dead-end: a fix that failed (a weights OOM "split over 2 GPUs" that then failed with world
size 2 > 1 GPU) must lead to the next fix the first failure offered (fp8 weights), as help
promises. So:

- a fix whose flags already failed (any cause) is untried no more and is skipped;
- when the latest failure was made by applying a fix of an earlier failure (its "parent"),
  the fix did not help. When it failed the same way, its own fixes are not taken (another
  of the same kind would loop); when it failed another way, its own untried fixes come first
  (a revert that only reproduces the parent already failed, so it is skipped). Then the
  parent's next untried fix, applied to the parent's flags: ``settings`` also undoes what the
  failed fix changed. Up the chain of parents while each was made by a fix.
- when nothing untried is left, ``f`` stops and says so; the operator picks from the card or
  edits the form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.domain.diagnosis import Fix
from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.serve_diff import diff_flags
from tui.domain.results import RunRecord, RunStatus


@dataclass(frozen=True)
class FixChoice:
    """What ``f`` does: apply ``fix`` from ``run``'s diagnosis, or say ``reason`` and stop.

    ``settings`` are the flags to put into the form: ``fix.set`` plus, when the fix comes from
    an earlier failure than the latest, the values that undo the failed attempt in between;
    ``env`` (the run's whole environment) when it changes.
    """

    run: RunRecord | None
    fix: Fix | None
    reason: str = ""
    settings: dict[str, Any] = field(default_factory=dict)


def _after(flags: ServeFlags, fix: Fix) -> ServeFlags | None:
    try:
        return fix.applied_to(flags)
    except (VtcError, ValueError):  # a fix that no longer validates is not a candidate
        return None


def _same(a: ServeFlags, b: ServeFlags) -> bool:
    """Same effective flags (a flag set to vLLM's default equals it unset)."""
    return a == b or not diff_flags(a, b)


def _failed_with(runs: Sequence[RunRecord], flags: ServeFlags) -> bool:
    return any(r.status is RunStatus.FAILED and _same(r.flags, flags) for r in runs)


def _made_by_a_fix_of(run: RunRecord, earlier: RunRecord) -> bool:
    diagnosis = earlier.diagnosis
    if diagnosis is None:
        return False
    return any(
        after is not None and _same(after, run.flags)
        for after in (_after(earlier.flags, fix) for fix in diagnosis.fixes)
    )


def _parent(runs: Sequence[RunRecord], index: int) -> int | None:
    """The earlier failure whose fix made ``runs[index]`` (the nearest), or ``None``."""
    for j in range(index - 1, -1, -1):
        earlier = runs[j]
        if earlier.status is RunStatus.FAILED and _made_by_a_fix_of(runs[index], earlier):
            return j
    return None


def _settings(latest: ServeFlags, target: ServeFlags, fix: Fix) -> dict[str, Any]:
    """``fix.set`` plus every field where ``target`` differs from the latest run's flags (the
    environment included: a fix's variables arrive as the whole new ``env``)."""
    settings = dict(fix.set)
    for name in type(target).model_fields:
        value = getattr(target, name)
        if name not in settings and value != getattr(latest, name):
            settings[name] = value
    return settings


def _untried(runs: Sequence[RunRecord], run: RunRecord, latest: RunRecord) -> FixChoice | None:
    diagnosis = run.diagnosis
    for fix in diagnosis.fixes if diagnosis is not None else ():
        after = _after(run.flags, fix)
        if after is not None and not _failed_with(runs, after):
            return FixChoice(run, fix, settings=_settings(latest.flags, after, fix))
    return None


def _same_kind(run: RunRecord, parent: RunRecord) -> bool:
    mine, theirs = run.diagnosis, parent.diagnosis
    return mine is not None and theirs is not None and mine.kind == theirs.kind


def _chain(runs: Sequence[RunRecord], index: int) -> list[int]:
    """``index`` and the failures whose fixes led to it, newest first (no cycles)."""
    chain = [index]
    parent = _parent(runs, index)
    while parent is not None and parent not in chain:
        chain.append(parent)
        parent = _parent(runs, parent)
    return chain


def choose_fix(runs: Sequence[RunRecord]) -> FixChoice:
    """The fix ``f`` applies now, from the latest failed run (or the failures it came from),
    or why there is none."""
    index = next(
        (i for i in range(len(runs) - 1, -1, -1) if runs[i].status is RunStatus.FAILED), None
    )
    if index is None:
        return FixChoice(None, None, "No failed run on the board.")
    latest = runs[index]
    chain = _chain(runs, index)
    for position, i in enumerate(chain):
        if position + 1 < len(chain) and _same_kind(runs[i], runs[chain[position + 1]]):
            continue  # its fix did not help: another of the same kind would loop
        choice = _untried(runs, runs[i], latest)
        if choice is not None:
            return choice
    if latest.diagnosis is None or (not latest.diagnosis.fixes and len(chain) == 1):
        why = latest.diagnosis.summary if latest.diagnosis else "no diagnosis"
        return FixChoice(latest, None, f"Run {latest.label} has no suggested fix: {why}")
    first = runs[chain[-1]]
    if len(chain) > 1 and _same_kind(latest, runs[chain[1]]):
        kind = latest.diagnosis.kind
        return FixChoice(
            latest,
            None,
            f"Run {latest.label} came from a fix for run {runs[chain[1]].label} and failed the "
            f"same way ({kind}); every fix offered since was tried and failed: pick from a "
            "card or edit the form.",
        )
    if len(chain) > 1:
        return FixChoice(
            latest,
            None,
            f"Run {latest.label} came from a fix for run {first.label}, and every fix "
            "offered since was tried and failed: pick from a card or edit the form.",
        )
    return FixChoice(latest, None, f"Every fix for run {latest.label} was tried and failed.")
