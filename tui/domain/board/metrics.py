"""The board's metrics, declared once: what each is called, its unit, which way is better.

Bench metrics are read by ``vllm bench serve``'s JSON keys (reference 4.2) through
:meth:`~tui.domain.results.BenchResult.metric`; KV capacity comes from the startup profile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tui.domain.results import RunRecord


@dataclass(frozen=True)
class MetricSpec:
    """One number on the board.

    ``key`` is bench serve's JSON key where there is one. ``scale_ms`` marks a latency in
    milliseconds (rendered as seconds from 1000 ms up, as seed 003 writes them).
    """

    key: str
    label: str
    unit: str
    higher_is_better: bool
    decimals: int
    read: Callable[[RunRecord], float | None]
    scale_ms: bool = False

    def value(self, run: RunRecord) -> float | None:
        """This metric of ``run``; ``None`` when the run has no such number."""
        return self.read(run)

    @property
    def title(self) -> str:
        """The label with its raw unit, for headers of raw numbers (CSV): ``TTFT p99 (ms)``."""
        return self.label if self.unit in self.label else f"{self.label} ({self.unit})"

    def format(self, value: float | None) -> str:
        """``value`` for a cell: N/A when absent, seconds for long latencies."""
        if value is None:
            return "N/A"
        if self.scale_ms:
            return f"{value / 1000:.2f} s" if abs(value) >= 1000 else f"{value:.1f} ms"
        if self.decimals == 0:
            return f"{round(value):,}"
        return f"{value:.{self.decimals}f}"


def _bench(key: str) -> Callable[[RunRecord], float | None]:
    def read(run: RunRecord) -> float | None:
        return run.bench.metric(key) if run.bench is not None else None

    return read


def _kv_tokens(run: RunRecord) -> float | None:
    tokens = run.startup.kv_cache_tokens
    return float(tokens) if tokens is not None else None


def _goodput(run: RunRecord) -> float | None:
    return run.bench.request_goodput if run.bench is not None else None


def _latency(key: str, label: str) -> MetricSpec:
    return MetricSpec(key, label, "ms", False, 1, _bench(key), scale_ms=True)


OUTPUT_THROUGHPUT = MetricSpec(
    "output_throughput", "out tok/s", "tok/s", True, 1, _bench("output_throughput")
)
REQUEST_THROUGHPUT = MetricSpec(
    "request_throughput", "req/s", "req/s", True, 2, _bench("request_throughput")
)
TTFT_MEAN = _latency("mean_ttft_ms", "TTFT mean")
TTFT_P50 = _latency("median_ttft_ms", "TTFT p50")
TTFT_P99 = _latency("p99_ttft_ms", "TTFT p99")
# The server's own TTFT (vLLM 0.33 --enable-per-request-metrics), beside the client's.
SERVER_TTFT_P50 = _latency("median_server_ttft_ms", "srv TTFT p50")
TPOT_MEAN = _latency("mean_tpot_ms", "TPOT mean")
ITL_MEAN = _latency("mean_itl_ms", "ITL mean")
ITL_P99 = _latency("p99_itl_ms", "ITL p99")
E2EL_MEAN = _latency("mean_e2el_ms", "E2EL mean")
E2EL_P99 = _latency("p99_e2el_ms", "E2EL p99")
KV_TOKENS = MetricSpec("kv_cache_tokens", "KV tokens", "tokens", True, 0, _kv_tokens)
GOODPUT = MetricSpec("request_goodput", "goodput req/s", "req/s", True, 2, _goodput)

#: The table's metric columns, in order (issue 10, item 1). Goodput only shows when a run
#: was measured against SLOs (:func:`table_metrics`).
TABLE_METRICS: tuple[MetricSpec, ...] = (
    OUTPUT_THROUGHPUT,
    REQUEST_THROUGHPUT,
    TTFT_P50,
    SERVER_TTFT_P50,
    TTFT_P99,
    TPOT_MEAN,
    ITL_P99,
    E2EL_P99,
    KV_TOKENS,
    GOODPUT,
)

#: The objective metrics: what "did my change help?" is answered with (a sweep's default
#: objective and the latency its SLOs bound). The table shows them, with their change,
#: right after the run and what it changed, before anything else (issue 29 item 2).
HEADLINE_METRICS: tuple[MetricSpec, ...] = (OUTPUT_THROUGHPUT, TTFT_P99)

#: The objective a change is judged by (:mod:`.judgement`): a sweep's default objective.
OBJECTIVE = OUTPUT_THROUGHPUT

#: The latencies an SLO bounds (``p99_ttft_ms``, ``mean_tpot_ms``, ``p99_itl_ms``,
#: ``p99_e2el_ms``: :mod:`tui.domain.sweep.slo`'s keys); a change is judged by the worst.
SLO_METRICS: tuple[MetricSpec, ...] = (TTFT_P99, TPOT_MEAN, ITL_P99, E2EL_P99)

#: Seed 003's Before / After rows, plus output throughput (the first seed's one number) and
#: every other metric of the table (ITL p99 was left out, issue 39): Before / After shows
#: every metric that moved, worse ones first (:func:`~.before_after.before_after`).
BEFORE_AFTER_METRICS: tuple[MetricSpec, ...] = (
    TTFT_MEAN,
    TTFT_P99,
    TPOT_MEAN,
    ITL_MEAN,
    E2EL_MEAN,
    E2EL_P99,
    REQUEST_THROUGHPUT,
    OUTPUT_THROUGHPUT,
    TTFT_P50,
    SERVER_TTFT_P50,
    ITL_P99,
    KV_TOKENS,
    GOODPUT,
)

#: The latencies a Pareto plot may put against throughput (issue 10, item 5).
LATENCY_AXES: dict[str, MetricSpec] = {"ttft": TTFT_P99, "e2el": E2EL_P99}

ALL_METRICS: dict[str, MetricSpec] = {
    m.key: m for m in (*TABLE_METRICS, *BEFORE_AFTER_METRICS, TTFT_MEAN)
}


def table_metrics(runs: list[RunRecord]) -> tuple[MetricSpec, ...]:
    """:data:`TABLE_METRICS` for ``runs``: goodput only when some run has a goodput, the
    server's TTFT only when some server reported it."""
    shown = {
        GOODPUT: any(GOODPUT.value(r) is not None for r in runs),
        SERVER_TTFT_P50: any(SERVER_TTFT_P50.value(r) is not None for r in runs),
    }
    return tuple(m for m in TABLE_METRICS if shown.get(m, True))


def metric(key: str) -> MetricSpec:
    """A metric by key; ``KeyError`` if none is declared."""
    return ALL_METRICS[key]
