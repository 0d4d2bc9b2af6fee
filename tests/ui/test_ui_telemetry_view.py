"""The telemetry renderings: sparklines, marks, latency lines, fitting and wrapping."""

from __future__ import annotations

from tui.domain.freshness import Freshness
from tui.domain.latency_text import latency_text
from tui.domain.telemetry import LatencyQuantiles, QuantileBound, SourceStatus
from tui.ui.telemetry_view import fit, freshness_mark, ms, panel_title, spark, wrap


def test_sparklines_start_at_zero_and_average_long_series_into_the_width() -> None:
    assert spark([0, 5, 10], 3) == "▁▅█"
    assert spark([10, 10], 2) == "██"  # a steady value is high, against zero
    assert spark([0.0, 0.0], 4) == "▁▁"
    assert spark([5.0], 4) == ""  # one point is no trend
    assert spark(list(range(100)), 10) == "▁▂▃▄▄▅▆▇▇█"  # means of ten buckets
    assert spark([1, 2, 3], 3, floor=None) == "▁▅█"


def test_marks_say_age_stale_down_and_nothing_when_unavailable() -> None:
    assert freshness_mark(None) == ""
    assert "0.4s" in freshness_mark(Freshness(SourceStatus.OK, 0.4))
    assert "STALE 12s" in freshness_mark(Freshness(SourceStatus.STALE, 12.0, "x"))
    assert "waiting" in freshness_mark(Freshness(SourceStatus.STALE, None, "no reading yet"))
    assert "DOWN" in freshness_mark(Freshness(SourceStatus.DOWN, 1.0, "refused"))
    assert freshness_mark(Freshness(SourceStatus.UNAVAILABLE, 1.0, "no driver")) == ""
    assert freshness_mark(Freshness(SourceStatus.OK, None)) == ""  # a standing reading
    assert panel_title("GPU", None, "(WSL2)") == "GPU (WSL2)"


def test_latency_lines_read_p50_p90_p99_and_say_idle_or_absent() -> None:
    q = LatencyQuantiles(p50=85.4, p90=940.0, p99=12_345.0, count=3)
    # one unit for the line (seconds once a quantile passes one), every number labelled
    assert latency_text("TTFT", q) == "TTFT p50/p90/p99 0.09/0.94/12 s"
    fast = LatencyQuantiles(p50=56.2, p90=75.0, p99=80.4, count=9)
    assert latency_text("TTFT", fast) == "TTFT p50/p90/p99 56/75/80 ms"
    # narrower: quantiles drop, their labels and the unit never do
    assert latency_text("TTFT", fast, 24) == "TTFT p50/99 56/80 ms"
    assert latency_text("TTFT", fast, 12) == "TTFT p99 80 ms"
    assert latency_text("ITL", LatencyQuantiles(count=0)) == "ITL idle"
    assert latency_text("queue", None) == "queue N/A"
    assert (ms(None), ms(1234.0)) == ("-", "1.2s")


def test_fit_drops_the_least_important_and_wrap_keeps_every_word() -> None:
    parts = [("0", 3), ("GeForce RTX 3080", 1), ("srv 8.9G", 2)]
    assert fit(parts, 40) == "0 GeForce RTX 3080 srv 8.9G"
    assert fit(parts, 12) == "0 srv 8.9G"
    assert fit(parts, 1) == "0"
    text = "WSL2: GPU access blocked by the operating system: update the driver"
    lines = wrap(text, 24, 9)
    assert all(len(line) <= 24 for line in lines) and " ".join(lines) == text
    cut = wrap(text, 24, 2)
    assert len(cut) == 2 and cut[-1].endswith("…")


def test_quantiles_inside_one_bucket_read_as_their_bound_not_as_numbers() -> None:
    below = QuantileBound(lower=0.0, upper=300.0)
    queue = LatencyQuantiles(
        p50=150.0, p90=270.0, p99=297.0, count=40, p50_bound=below, p90_bound=below, p99_bound=below
    )
    assert latency_text("queue", queue) == "queue p50-p99 <300 ms"
    past = QuantileBound(lower=10_000.0, upper=float("inf"))
    mixed = LatencyQuantiles(
        p50=150.0, p90=800.0, p99=10_000.0, count=40, p50_bound=below, p99_bound=past
    )
    assert latency_text("E2E", mixed) == "E2E p50/p90/p99 <0.30/0.80/>10 s"
    within = QuantileBound(lower=60.0, upper=80.0)
    one = LatencyQuantiles(
        p50=70.0, p90=78.0, p99=79.8, count=5, p50_bound=within, p90_bound=within, p99_bound=within
    )
    assert latency_text("TTFT", one) == "TTFT p50-p99 60-80 ms"
