"""A twin for capacity tests: a queue whose latency grows as the rate nears its throughput.

:class:`QueueTwin` answers a load at a rate with an M/M/1-like latency, ``base / (1 -
rate / throughput)`` (and without bound at or above the throughput), so the highest rate
meeting an SLO is known in closed form (:meth:`QueueTwin.max_rate`) and a search can be
judged against it; it counts its predictions.
"""

from __future__ import annotations

import math

from tui.domain.prediction import ErrorSource, MetricInterval, Prediction, TwinMetric
from tui.domain.workload import LoadSpec


class QueueTwin:
    """Predictions of a queue with ``throughput`` req/s and unloaded p99 TTFT ``base_ms``."""

    def __init__(
        self,
        throughput: float = 10.0,
        base_ms: float = 100.0,
        error_pct: float = 10.0,
        starts: bool = True,
        throughput_error_pct: float | None = None,
    ) -> None:
        self.throughput = throughput
        self.base_ms = base_ms
        self.error_pct = error_pct
        self.throughput_error_pct = throughput_error_pct  # None: throughput not validated
        self.starts = starts
        self.rates: list[float] = []

    def latency(self, rate: float) -> float:
        """The p99 TTFT at ``rate`` (ms): grows without bound toward the throughput."""
        if rate >= self.throughput:
            return self.base_ms * 1000.0
        return self.base_ms / (1.0 - rate / self.throughput)

    def max_rate(self, slo_ms: float, scale: float = 1.0) -> float:
        """The rate where ``scale`` times :meth:`latency` equals ``slo_ms``."""
        return self.throughput * (1.0 - scale * self.base_ms / slo_ms)

    def _throughput_interval(self) -> tuple[MetricInterval, ...]:
        pct = self.throughput_error_pct
        if pct is None:
            return ()
        metric = TwinMetric.OUTPUT_THROUGHPUT
        return (MetricInterval(metric=metric, interval_pct=pct, median_pct=pct / 2, worst_pct=pct),)

    def __call__(self, load: LoadSpec) -> Prediction:
        """The prediction for ``load`` (its rate)."""
        self.rates.append(load.request_rate)
        label = Prediction(
            profile="queue r1",
            error_pct=self.error_pct,
            error_source=ErrorSource.VALIDATION,
            starts=self.starts,
            intervals=tuple(
                MetricInterval(
                    metric=metric,
                    interval_pct=self.error_pct,
                    median_pct=self.error_pct / 2,
                    worst_pct=self.error_pct,
                )
                for metric in (TwinMetric.P99_TTFT, TwinMetric.P99_E2EL)
            )
            + self._throughput_interval(),
        )
        if not self.starts:
            return label.model_copy(update={"failure": "KV cache too small"})
        rate = load.request_rate
        served = self.throughput if math.isinf(rate) else min(rate, self.throughput)
        ttft = self.latency(rate)
        return label.model_copy(
            update={
                "request_throughput": served,
                "p99_ttft_ms": ttft,
                "mean_ttft_ms": ttft / 2,
                "p99_e2el_ms": ttft * 3,
            }
        )
