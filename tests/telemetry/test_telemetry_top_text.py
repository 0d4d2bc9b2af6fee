"""``vtc top``'s text line reads quantiles as the console's Metrics panel does (issue 17):
one rule, declared once (``tui.domain.latency_text``), so a quantile inside the lowest
bucket prints as its bound (``<300 ms``), never as PromQL's interpolation (``150``)."""

from __future__ import annotations

from tui.domain.latency_text import latency_text
from tui.domain.telemetry import LatencyQuantiles, QuantileBound
from tui.telemetry.top_report import GpuReport, TopReport, text_line

LOWEST = QuantileBound(lower=0.0, upper=300.0)


def report() -> TopReport:
    queue = LatencyQuantiles(
        p50=150.0,
        p90=270.0,
        p99=297.0,
        count=40,
        p50_bound=LOWEST,
        p90_bound=LOWEST,
        p99_bound=LOWEST,
    )
    ttft = LatencyQuantiles(p50=56.0, p90=75.0, p99=80.0, count=40)
    return TopReport(
        url="http://127.0.0.1:8000/metrics",
        state="ok",
        latency_ms={"ttft": ttft, "itl": None, "e2el": LatencyQuantiles(count=0), "queue": queue},
        gpus=GpuReport(state="ok"),
    )


def test_a_quantile_inside_the_lowest_bucket_prints_as_its_bound() -> None:
    line = text_line(report())
    assert "queue p50-p99 <300 ms" in line
    assert "150" not in line and "270" not in line and "297" not in line


def test_the_text_line_labels_each_latency_as_the_console_does() -> None:
    line = text_line(report())
    for name, label in (("ttft", "TTFT"), ("itl", "ITL"), ("e2el", "E2E"), ("queue", "queue")):
        assert latency_text(label, report().latency_ms[name]) in line
    assert "TTFT p50/p90/p99 56/75/80 ms" in line
    assert "ITL N/A" in line and "E2E idle" in line
