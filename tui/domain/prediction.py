"""What the twin of a server predicted for a run, labelled so wherever it is shown.

A :class:`Prediction` is made before a load runs (or while the form is edited, before a
restart) by the twin of the current server (:func:`tui.twin.predict.predict`); it travels with
the run's record, so the board, ``vtc runs``, the exports and the report show it beside the
measurement, always with :meth:`Prediction.label` (``predicted (twin NAME r2, ±7%
validation)``): the word "predicted", the profile it came from and the error it states,
named by where that error was measured (:class:`ErrorSource`). The stated error is an
interval: the 80th percentile of the absolute errors on loads the fit never saw, so about
four outcomes in five fall inside it. A run the twin missed by more than that (and by more
than :data:`MISS_FLOOR_PCT`) is flagged: the machine changed, or the profile is stale.
:func:`twin_label` is the one place the label is written.
"""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, field_validator

MISS_FLOOR_PCT = 10.0
"""A miss smaller than this is never flagged, however small the profile's own error."""

INTERVAL_PERCENTILE = 80.0
"""The share of outcomes (percent) a stated error covers: its percentile of absolute errors."""


class ErrorSource(StrEnum):
    """Where a twin's stated error was measured."""

    VALIDATION = "validation"  # loads the fit never saw (left out in turn at calibration)
    FIT = "fit"  # the very loads it was fitted on: in-sample, optimistic
    UNFITTED = "unfitted"  # nothing measured yet (a cold profile)

    @classmethod
    def read(cls, value: object) -> ErrorSource:
        """The source of a saved value (``held-out``, an older name, is a validation)."""
        return cls.VALIDATION if value == "held-out" else cls(str(value))


def twin_label(profile: str, error_pct: float | None, source: ErrorSource, caveat: str = "") -> str:
    """``predicted (twin NAME r2, ±7% validation)``: what every predicted number carries.

    ``profile`` is ``NAME rN``; a fit-only error says so (``±7% fit only``), an unfitted
    twin that it is not fitted yet, an unknown error that it is unknown; ``caveat``: how
    the profile's server differs from the one predicted for.
    """
    if source is ErrorSource.UNFITTED:
        err = "not fitted yet"
    elif error_pct is None or not math.isfinite(error_pct):
        err = "error unknown"
    elif source is ErrorSource.FIT:
        err = f"±{error_pct:.0f}% fit only"
    else:
        err = f"±{error_pct:.0f}% validation"
    other = f"; profile of another server: {caveat}" if caveat else ""
    return f"predicted (twin {profile}, {err}{other})"


def _ms(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


class Prediction(BaseModel):
    """The twin's figures for one command line and load (``starts`` False: why not).

    The one result type of the twin: a prediction for the form and the board, a fit's
    replay of a measured load and a fidelity check's twin side are all this. Its figures
    are bench serve's (milliseconds, tokens per second), read by key with :meth:`metric`.
    """

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    profile: str  # "NAME r2"
    error_pct: float  # the stated interval: the ± every figure carries (see the module)
    # Records saved before validation existed carry a fit's median: read as such.
    error_source: ErrorSource = ErrorSource.FIT
    starts: bool
    failure: str | None = None
    kv_tokens: int = 0
    completed: int | None = None
    duration_s: float | None = None
    output_throughput: float | None = None
    request_throughput: float | None = None
    mean_ttft_ms: float | None = None
    p90_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    mean_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    caveat: str = ""  # a profile of another server: what differs (the label says so)

    @field_validator("error_source", mode="before")
    @classmethod
    def _older_source(cls, value: object) -> ErrorSource:
        return ErrorSource.read(value)

    def label(self) -> str:
        """:func:`twin_label` of this prediction's profile, error and caveat."""
        return twin_label(self.profile, self.error_pct, self.error_source, self.caveat)

    def metric(self, key: str) -> float:
        """A figure by bench serve's key (0 when the twin has none: it did not run)."""
        value = getattr(self, key)
        return float(value) if value is not None else 0.0

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
        """The measurement is outside the stated interval (and the floor)."""
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
