"""What a results card compares: the bench metrics it shows and their deltas.

The first card is the reference: each later card shows how far it moved from it, and
whether that is better (higher throughput, lower latency) or worse.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.domain.results import BenchResult, RunRecord, RunStatus


@dataclass(frozen=True)
class CardMetric:
    """One bench-serve metric on a card (key as in ``BenchResult.metric``)."""

    key: str
    label: str
    unit: str
    higher_is_better: bool


CARD_METRICS: tuple[CardMetric, ...] = (
    CardMetric("output_throughput", "out tok/s", "", True),
    CardMetric("request_throughput", "req/s", "", True),
    CardMetric("mean_ttft_ms", "TTFT mean", "ms", False),
    CardMetric("p99_ttft_ms", "TTFT p99", "ms", False),
    CardMetric("mean_tpot_ms", "TPOT mean", "ms", False),
    CardMetric("p99_itl_ms", "ITL p99", "ms", False),
)


@dataclass(frozen=True)
class Delta:
    """The relative change of one metric against the reference card."""

    percent: float
    better: bool


def delta(metric: CardMetric, value: float | None, reference: float | None) -> Delta | None:
    """The change from ``reference`` to ``value`` in percent, or ``None`` if not comparable."""
    if value is None or reference is None or reference == 0:
        return None
    change = (value - reference) / abs(reference) * 100.0
    if change == 0:
        return Delta(0.0, True)
    return Delta(change, (change > 0) == metric.higher_is_better)


def bench_reference(runs: list[RunRecord]) -> tuple[int, BenchResult] | None:
    """The card bench deltas are measured against: the first run, else the first with a result.

    The first card is usually the baseline. When its start failed (seed 000's run 1 did) it
    has no numbers, so the first run that has a result stands in; cards say which one.
    """
    for index, run in enumerate(runs):
        if run.bench is not None:
            return index, run.bench
    return None


def latest_failed(runs: list[RunRecord]) -> tuple[int, RunRecord] | None:
    """The most recent run whose start failed (what ``f`` takes its fix from)."""
    for index in range(len(runs) - 1, -1, -1):
        if runs[index].status is RunStatus.FAILED:
            return index, runs[index]
    return None
