"""What a strategy decides besides its trials: the plan's size, notes, the trial that stands.

A strategy reads the :class:`~tui.tune.context.SweepContext` and yields these; the sweep run
applies them to the context (the one writer of the sweep's state).
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.domain.sweep.outcome import TrialOutcome


@dataclass(frozen=True)
class Planned:
    """How many trials the strategy expects to run (``None``: not known before it measures)."""

    count: int | None


@dataclass(frozen=True)
class Note:
    """A line for the sweep's notes (why it stopped, what it chose)."""

    text: str


@dataclass(frozen=True)
class Best:
    """The trial that stands as the sweep's best, over the best measured (a confirmation)."""

    outcome: TrialOutcome


Decision = Planned | Note | Best
"""One decision a strategy yields."""
