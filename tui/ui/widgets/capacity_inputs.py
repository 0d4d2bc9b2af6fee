"""The capacity view's questions: the SLOs, a target rate, and which flag set to ask about.

The SLOs are the sweep's keys (``p99_ttft_ms=500,p99_e2el_ms=4000``), read by the domain's
:class:`~tui.domain.sweep.slo.SloLimits`; a bad entry is one line (:attr:`problem`) and
asks nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import ValidationError
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Select

from tui.domain.sweep.slo import SloLimits

DEFAULT_SLO = "p99_ttft_ms=500"


def parse_slos(text: str) -> tuple[SloLimits | None, str]:
    """``p99_ttft_ms=500,...`` as limits, or ``None`` and what is wrong (one line)."""
    limits: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            return None, f"SLO: expected KEY=MS, got {part.strip()[:40]!r}"
        try:
            limits[key.strip()] = float(value)
        except ValueError:
            return None, f"SLO {key.strip()[:40]}: not a number"
    try:
        return SloLimits(limits=limits), ""
    except ValidationError as exc:
        return None, "SLO: " + str(exc.errors()[0]["msg"]).removeprefix("Value error, ")


def parse_rate(text: str) -> tuple[float | None, str]:
    """A target rate (empty: none), or what is wrong."""
    if not text.strip():
        return None, ""
    try:
        value = float(text)
    except ValueError:
        return None, "target rate: not a number"
    if not (math.isfinite(value) and value > 0):
        return None, "target rate: must be above 0"
    return value, ""


class CapacityInputs(Horizontal):
    """SLOs, target rate, flag set: one row."""

    DEFAULT_CSS = """
    CapacityInputs { height: 3; }
    CapacityInputs #capacity-slo { width: 2fr; }
    CapacityInputs #capacity-target { width: 1fr; max-width: 18; }
    CapacityInputs #capacity-set { width: 1fr; }
    """

    def __init__(self, names: Sequence[str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._names = list(names)

    def compose(self) -> ComposeResult:
        """The three fields."""
        yield Input(DEFAULT_SLO, placeholder="p99_ttft_ms=500", id="capacity-slo")
        yield Input(placeholder="target req/s", id="capacity-target")
        yield Select(
            [(name, name) for name in self._names],
            value=self._names[0],
            allow_blank=False,
            id="capacity-set",
        )

    def read(self) -> tuple[SloLimits | None, float | None, str]:
        """The SLOs and the target rate; the first problem ("" when none)."""
        slos, problem = parse_slos(self.query_one("#capacity-slo", Input).value)
        rate, rate_problem = parse_rate(self.query_one("#capacity-target", Input).value)
        return slos, rate, problem or rate_problem

    @property
    def chosen(self) -> str:
        """The flag set chosen."""
        return str(self.query_one("#capacity-set", Select).value)
