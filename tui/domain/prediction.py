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
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

MISS_FLOOR_PCT = 10.0
"""A miss smaller than this is never flagged, however small the profile's own error."""

INTERVAL_PERCENTILE = 80.0
"""The share of outcomes (percent) a stated error covers (:func:`covering`)."""


def covering(errors: Sequence[float], share_pct: float = INTERVAL_PERCENTILE) -> float:
    """The error a new outcome stays within ``share_pct`` % of the time, from ``errors``
    scored out of sample: split conformal prediction's rank, the ``ceil(q (n + 1))``-th
    smallest of the ``n`` errors (a plain percentile of ``n`` errors under-covers a new one:
    it is exceeded with probability ``1 - k / (n + 1)``). Fewer errors than that rank
    needs: the largest (``nan`` for none)."""
    ordered = sorted(e for e in errors if math.isfinite(e))
    if not ordered:
        return math.nan
    rank = math.ceil(share_pct / 100.0 * (len(ordered) + 1))
    return float(ordered[min(rank, len(ordered)) - 1])


class TwinMetric(StrEnum):
    """A figure the twin predicts and a validation scores, by bench serve's key."""

    OUTPUT_THROUGHPUT = "output_throughput"
    MEAN_TTFT = "mean_ttft_ms"
    P99_TTFT = "p99_ttft_ms"
    MEAN_TPOT = "mean_tpot_ms"
    MEAN_ITL = "mean_itl_ms"
    P99_ITL = "p99_itl_ms"
    MEAN_E2EL = "mean_e2el_ms"
    P99_E2EL = "p99_e2el_ms"

    @property
    def short(self) -> str:
        """``tok/s``, ``p99 TTFT``...: how a line names it."""
        return _SHORT[self]


_SHORT = {
    TwinMetric.OUTPUT_THROUGHPUT: "tok/s",
    TwinMetric.MEAN_TTFT: "TTFT",
    TwinMetric.P99_TTFT: "p99 TTFT",
    TwinMetric.MEAN_TPOT: "TPOT",
    TwinMetric.MEAN_ITL: "ITL",
    TwinMetric.P99_ITL: "p99 ITL",
    TwinMetric.MEAN_E2EL: "E2EL",
    TwinMetric.P99_E2EL: "p99 E2EL",
}


class MetricInterval(BaseModel):
    """One metric's measured error: the interval a prediction of it states (the
    :data:`INTERVAL_PERCENTILE` th percentile of its absolute % errors), median, worst."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    metric: TwinMetric
    interval_pct: float
    median_pct: float
    worst_pct: float
    count: int = 0  # residuals behind it


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
    p99_itl_ms: float | None = None
    p99_e2el_ms: float | None = None
    caveat: str = ""  # a profile of another server: what differs (the label says so)
    # The interval each metric states, measured on loads the fit never saw (a metric not
    # here: not validated). Typed: read it with :meth:`interval`.
    intervals: tuple[MetricInterval, ...] = Field(default_factory=tuple)

    @field_validator("error_source", mode="before")
    @classmethod
    def _older_source(cls, value: object) -> ErrorSource:
        return ErrorSource.read(value)

    def label(self) -> str:
        """:func:`twin_label` of this prediction's profile, error and caveat."""
        return twin_label(self.profile, self.error_pct, self.error_source, self.caveat)

    def metric(self, key: str) -> float:
        """A figure by bench serve's key (0 when the twin has none: it did not run)."""
        value = getattr(self, str(key))
        return float(value) if value is not None else 0.0

    def interval(self, metric: TwinMetric) -> float | None:
        """The ± percent a prediction of ``metric`` states, measured on held-out loads
        (``None``: that metric was not validated; a fit-only profile states none)."""
        if self.error_source is not ErrorSource.VALIDATION:
            return None
        for m in self.intervals:
            if m.metric is metric:
                return m.interval_pct if math.isfinite(m.interval_pct) else None
        return None

    def figure(self, metric: TwinMetric) -> str:
        """``1,216 tok/s ±8%`` / ``p99 TTFT 68 ms ±22%`` / ``... (not validated)``."""
        value = getattr(self, metric.value)
        if metric is TwinMetric.OUTPUT_THROUGHPUT:
            text = f"{value:,.0f} tok/s" if value else "- tok/s"
        else:
            text = f"{metric.short} {_ms(value)}"
        pct = self.interval(metric)
        if pct is not None:
            return f"{text} ±{pct:.0f}%"
        # A record of before per-metric intervals: its label states the one it had.
        return f"{text} (not validated)" if self.intervals else text

    def line(self) -> str:
        """One line for the form: the figures, or that it would not start and why."""
        if not self.starts:
            why = " ".join((self.failure or "").split())
            why = why if len(why) <= 240 else why[:239] + "…"
            return f"{self.label()}: will NOT start: {why}"
        shown = (TwinMetric.OUTPUT_THROUGHPUT, TwinMetric.P99_TTFT, TwinMetric.P99_E2EL)
        figures = " · ".join(self.figure(m) for m in shown)
        return f"{self.label()}: starts, KV {self.kv_tokens:,} tok · {figures}"

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
        """A measurement outside its metric's stated interval (and the floor): throughput
        against throughput's, mean E2EL against mean E2EL's (the overall ± where a metric
        has none of its own)."""
        overall = self.error_pct if math.isfinite(self.error_pct) else 0.0
        for metric, predicted, measured in (
            (TwinMetric.OUTPUT_THROUGHPUT, self.output_throughput, throughput),
            (TwinMetric.MEAN_E2EL, self.mean_e2el_ms, mean_e2el_ms),
        ):
            if predicted is None or not measured:
                continue
            own = self.interval(metric)
            bound = max(own if own is not None else overall, MISS_FLOOR_PCT)
            if 100.0 * abs(predicted - measured) / measured > bound:
                return True
        return False

    def versus(self, throughput: float | None, mean_e2el_ms: float | None) -> str:
        """``predicted (...): 1,234 tok/s, E2EL 1.20 s; measured off by 8%`` (+ the flag)."""
        tput = self.figure(TwinMetric.OUTPUT_THROUGHPUT)
        text = f"{self.label()}: {tput}, {self.figure(TwinMetric.MEAN_E2EL)}"
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
