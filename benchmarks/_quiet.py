"""The one rule every benchmark applies to its own figures: measured alone, judged, exit code.

A timing, a fidelity error or a wall-time ratio is only valid when nothing else runs: the
1-minute load average is printed before and after, and a run whose load average passed
``MAX_LOAD`` says its figure is not valid instead of reporting it as met. A benchmark whose
goal is not met exits non-zero. Use::

    gate = QuietGate("sim_fidelity")       # prints the load average before
    ...measure...
    gate.check("median throughput error", 0.083, goal=0.10)   # <= goal is met
    sys.exit(gate.finish())                # prints it after; 0 met, 1 missed, 3 not valid
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import IntEnum

MAX_LOAD = 1.5  # above this 1-minute load average a figure is not a figure (DEVELOPERS.md)


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
    peak: float = 0.0
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
        """Whether the machine stayed quiet enough for the figures to count."""
        return self.peak <= self.max_load

    def finish(self) -> int:
        """Print the load after and the verdict; return the exit status."""
        self.sample()
        print(
            f"{self.name}: load average after {load_now():.2f}, highest {self.peak:.2f} "
            f"(figures valid at <= {self.max_load})"
        )
        if not self.valid:
            print(f"{self.name}: NOT VALID: the machine was busy; rerun on a quiet machine")
            return Verdict.NOT_VALID
        if self.missed:
            print(f"{self.name}: goal MISSED: {', '.join(self.missed)}")
            return Verdict.MISSED
        print(f"{self.name}: goal met")
        return Verdict.MET
