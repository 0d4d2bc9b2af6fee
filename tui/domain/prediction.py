"""What the twin of a server predicted for a run, labelled so wherever it is shown.

A :class:`Prediction` is made before a load runs (or while the form is edited, before a
restart) by the twin of the current server (:func:`tui.sim.twin.predict`); it travels with
the run's record, so the board, ``vtc runs``, the exports and the report show it beside the
measurement, always with :meth:`Prediction.label` (``predicted (twin NAME r2, ±7%)``): the
word "predicted", the profile it came from and that profile's measured error. A run the
twin missed by more than that error (and by more than :data:`MISS_FLOOR_PCT`) is flagged:
the machine changed, or the profile is stale.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

MISS_FLOOR_PCT = 10.0
"""A miss smaller than this is never flagged, however small the profile's own error."""


def _ms(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


class Prediction(BaseModel):
    """The twin's figures for one command line and load (``starts`` False: why not)."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    profile: str  # "NAME r2"
    error_pct: float  # the profile's measured median error: the ± every figure carries
    starts: bool
    failure: str | None = None
    kv_tokens: int = 0
    output_throughput: float | None = None
    mean_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    mean_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    caveat: str = ""  # a profile of another server: what differs (the label says so)

    def label(self) -> str:
        """``predicted (twin NAME r2, ±7%)`` (``; profile of another server: ...``)."""
        err = f"±{self.error_pct:.0f}%" if math.isfinite(self.error_pct) else "error unknown"
        other = f"; profile of another server: {self.caveat}" if self.caveat else ""
        return f"predicted (twin {self.profile}, {err}{other})"

    def line(self) -> str:
        """One line for the form: the figures, or that it would not start and why."""
        if not self.starts:
            why = " ".join((self.failure or "").split())
            why = why if len(why) <= 240 else why[:239] + "…"
            return f"{self.label()}: will NOT start: {why}"
        tput = f"{self.output_throughput:,.0f} tok/s" if self.output_throughput else "-"
        return (
            f"{self.label()}: starts, KV {self.kv_tokens:,} tok · {tput} · "
            f"p99 TTFT {_ms(self.p99_ttft_ms)} · p99 E2EL {_ms(self.p99_e2el_ms)}"
        )

    def miss_pct(self, throughput: float | None, mean_e2el_ms: float | None) -> float | None:
        """How far a measurement is from the prediction: the larger absolute % error of
        throughput and mean E2EL (``None``: nothing to compare)."""
        errors = []
        for predicted, measured in (
            (self.output_throughput, throughput),
            (self.mean_e2el_ms, mean_e2el_ms),
        ):
            if predicted is not None and measured:
                errors.append(100.0 * abs(predicted - measured) / measured)
        return max(errors) if errors else None

    def missed(self, throughput: float | None, mean_e2el_ms: float | None) -> bool:
        """The measurement is further off than the profile's error (and the floor)."""
        miss = self.miss_pct(throughput, mean_e2el_ms)
        bound = max(self.error_pct if math.isfinite(self.error_pct) else 0.0, MISS_FLOOR_PCT)
        return miss is not None and miss > bound

    def versus(self, throughput: float | None, mean_e2el_ms: float | None) -> str:
        """``predicted (...): 1,234 tok/s, E2EL 1.20 s; measured off by 8%`` (+ the flag)."""
        tput = f"{self.output_throughput:,.0f} tok/s" if self.output_throughput else "-"
        text = f"{self.label()}: {tput}, E2EL {_ms(self.mean_e2el_ms)}"
        miss = self.miss_pct(throughput, mean_e2el_ms)
        if miss is None:
            return text
        text += f"; measured off by {miss:.0f}%"
        if self.missed(throughput, mean_e2el_ms):
            text += (
                " (more than the profile's error: the machine changed or the profile is "
                "stale; recalibrate)"
            )
        return text
