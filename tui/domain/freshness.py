"""How fresh a panel's data is: its age, and ok / stale / down / unavailable with the reason.

A source polled every ``interval`` seconds is *stale* once its newest reading is older
than two intervals (two readings missed: a hung scrape, a stalled thread), *down* when
its newest reading says it could not be read (with that reading's reason), *unavailable*
for a permanent, explained absence (no NVIDIA driver). Pure: the hub stamps samples with
its clock and asks here at render time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tui.domain.telemetry import SourceStatus

STALE_AFTER_INTERVALS = 2.0
NO_READING_YET = "no reading yet"


class TimedSample(Protocol):
    """A sample with a time (monotonic seconds), a status and the reason for it."""

    @property
    def t(self) -> float: ...
    @property
    def status(self) -> SourceStatus: ...
    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class Freshness:
    """What a panel says about its data.

    ``age_s``: seconds since the newest reading (``None``: none yet). ``reason``: why it is
    not ``OK`` (empty when it is).
    """

    state: SourceStatus
    age_s: float | None
    reason: str = ""

    @property
    def ok(self) -> bool:
        """True when the data is current."""
        return self.state is SourceStatus.OK

    @property
    def label(self) -> str:
        """One short line: ``"1 s ago"``, ``"stale: no new reading for 5 s"``, ``"down: ..."``."""
        if self.state is SourceStatus.OK:
            return f"{_seconds(self.age_s)} ago"
        return f"{self.state.value}: {self.reason}" if self.reason else self.state.value


def _seconds(age: float | None) -> str:
    if age is None:
        return "?"
    return f"{age:.1f} s" if age < 10 else f"{age:.0f} s"


def freshness(
    sample: TimedSample | None,
    now: float,
    interval_s: float,
    *,
    stale_after: float = STALE_AFTER_INTERVALS,
) -> Freshness:
    """The state of a source whose newest reading is ``sample``, at ``now``.

    A reading whose own status is not OK keeps it (down stays down until a reading says
    otherwise); an OK reading older than ``stale_after`` intervals is stale.
    """
    if sample is None:
        return Freshness(SourceStatus.STALE, None, NO_READING_YET)
    age = max(0.0, now - sample.t)
    if sample.status is not SourceStatus.OK:
        return Freshness(sample.status, age, sample.message)
    if age > stale_after * interval_s:
        return Freshness(SourceStatus.STALE, age, f"no new reading for {_seconds(age)}")
    return Freshness(SourceStatus.OK, age)
