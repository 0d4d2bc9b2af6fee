"""The one rule every benchmark applies to its own figures: measured alone, judged, exit code.

A timing, a fidelity error or a wall-time ratio is only valid when nothing else runs: the
1-minute load average is printed before and after, and a run whose load average passed
``MAX_LOAD`` says its figure is not valid instead of reporting it as met. A benchmark whose
goal is not met exits non-zero.

"Before" is read before the benchmark starts anything. "After" is read once the
benchmark's own servers have stopped and the 1-minute average has had time to forget them
(it decays by 1/e a minute: a benchmark that kept two cores busy reads ~2 the moment it ends
on a quiet machine, ~0.7 a minute later, while another job's load stays): :meth:`finish`
waits up to ``settle_s`` for it to fall to ``MAX_LOAD``. Mid-run samples may include the
benchmark's own server on every core (``own_load``), never more than that plus
``MAX_LOAD``: beyond it something else ran. Use::

    gate = QuietGate("sim_fidelity")       # prints the load average before
    ...measure...
    gate.check("median throughput error", 0.083, goal=0.10)   # <= goal is met
    sys.exit(gate.finish())                # prints it after; 0 met, 1 missed, 3 not valid
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

MAX_LOAD = 1.5  # above this 1-minute load average a figure is not a figure (DEVELOPERS.md)
SETTLE_S = 120.0  # how long finish() waits for the benchmark's own load to decay
SETTLE_POLL_S = 5.0


class Verdict(IntEnum):
    """A benchmark's exit status."""

    MET = 0
    MISSED = 1
    NOT_VALID = 3  # the machine was busy: rerun on a quiet machine


def load_now() -> float:
    """The host's 1-minute load average."""
    return os.getloadavg()[0]


@dataclass
class QuietGate:
    """Load average before and after, goals checked, one verdict for the exit code."""

    name: str
    max_load: float = MAX_LOAD
    before: float = field(default_factory=load_now)
    own_load: float = field(default_factory=lambda: float(os.cpu_count() or 1))
    settle_s: float = SETTLE_S
    wait: Callable[[float], None] = time.sleep
    peak: float = 0.0
    after: float | None = None
    missed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.peak = self.before
        print(f"{self.name}: load average before {self.before:.2f} on {os.cpu_count()} cores")

    def sample(self) -> float:
        """Read the load average mid-run (the highest seen decides validity)."""
        now = load_now()
        self.peak = max(self.peak, now)
        return now

    def check(
        self, what: str, value: float, *, goal: float, higher_is_better: bool = False
    ) -> bool:
        """Print ``what`` against its goal and remember a miss; True when met."""
        met = value >= goal if higher_is_better else value <= goal
        sign = ">=" if higher_is_better else "<="
        print(f"  {what}: {value:.4g} (goal {sign} {goal:.4g}) {'met' if met else 'MISSED'}")
        if not met:
            self.missed.append(what)
        return met

    @property
    def valid(self) -> bool:
        """Whether the machine was quiet before, quiet again after the benchmark's own load
        decayed, and never busier in between than the benchmark's own server can make it."""
        after = self.after if self.after is not None else self.peak
        return (
            self.before <= self.max_load
            and after <= self.max_load
            and self.peak <= self.max_load + self.own_load
        )

    def settle(self) -> tuple[float, float]:
        """The load average once it falls to ``max_load``, or at ``settle_s``; and the
        seconds waited (call it after the benchmark's own servers have stopped)."""
        waited = 0.0
        now = self.sample()
        while now > self.max_load and waited < self.settle_s:
            self.wait(SETTLE_POLL_S)
            waited += SETTLE_POLL_S
            now = self.sample()
        self.after = now
        return now, waited

    def finish(self) -> int:
        """Print the load after (settled) and the verdict; return the exit status."""
        right_after = load_now()
        after, waited = self.settle()
        print(
            f"{self.name}: load average after {after:.2f} ({waited:.0f} s after its own "
            f"processes stopped; {right_after:.2f} at once), highest mid-run {self.peak:.2f} "
            f"(valid: before and after <= {self.max_load}, mid-run <= "
            f"{self.max_load + self.own_load:g} with its own server on every core)"
        )
        if not self.valid:
            print(f"{self.name}: NOT VALID: the machine was busy; rerun on a quiet machine")
            return Verdict.NOT_VALID
        if self.missed:
            print(f"{self.name}: goal MISSED: {', '.join(self.missed)}")
            return Verdict.MISSED
        print(f"{self.name}: goal met")
        return Verdict.MET
