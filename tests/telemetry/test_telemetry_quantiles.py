"""Server-side quantiles: PromQL's histogram_quantile over bucket increases, on real pages.

The pages are /metrics captures of the real CPU build of vLLM 0.32 (tests/captures):
``after_load`` then ``after_prefix_load`` are two scrapes of one server (22 then 38
requests); ``after_pressure`` comes from a later server (a restart: new ``_created`` stamps,
lower counts). Every expected number below is worked by hand from the bucket counts printed
in the comment beside it, with PromQL's rule: rank = q * count, the first bucket whose
cumulative count reaches the rank, linear interpolation inside it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tui.domain.quantiles import (
    HistogramWindow,
    LatencyTracker,
    bucket_around,
    bucket_quantile,
    histogram_from_buckets,
    increase,
    largest_observed,
    quantile_bound,
    quantiles_ms,
)
from tui.domain.telemetry import Histogram, QuantileBound
from tui.telemetry.vllm_metrics import VllmScrape, parse_vllm_metrics

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
INF = math.inf


def page(name: str, t: float = 0.0) -> VllmScrape:
    return parse_vllm_metrics((CAPTURES / f"metrics_{name}.txt").read_text(), t)


def test_capture_histograms_are_read_with_every_bucket() -> None:
    ttft = page("after_load").histograms["ttft"]
    assert ttft.bounds[:5] == (0.001, 0.005, 0.01, 0.02, 0.04) and ttft.bounds[-1] == INF
    assert ttft.counts[:5] == (0.0, 0.0, 9.0, 11.0, 22.0) and ttft.count == 22.0
    assert ttft.sum == pytest.approx(0.3710448741912842)
    assert ttft.created == pytest.approx(1.7952389942638686e09)
    assert set(page("after_load").histograms) == {
        "ttft",
        "itl",
        "e2el",
        "queue",
        "prefill",
        "decode",
    }


def test_cumulative_ttft_quantiles_by_hand() -> None:
    # after_load TTFT: le 0.01 -> 9, 0.02 -> 11, 0.04 -> 22 (of 22)
    q = quantiles_ms(page("after_load").histograms["ttft"])
    assert q is not None
    assert q.p50 == pytest.approx(20.0)  # rank 11 in (0.01, 0.02]: 0.01 + 0.01 * 2/2
    assert q.p90 == pytest.approx(36.0)  # rank 19.8 in (0.02, 0.04]: 0.02 + 0.02 * 8.8/11
    assert q.p99 == pytest.approx(39.6)  # rank 21.78: 0.02 + 0.02 * 10.78/11
    assert q.count == 22
    assert q.mean == pytest.approx(0.3710448741912842 / 22 * 1000)


def test_lowest_bucket_interpolates_from_zero() -> None:
    # after_load ITL: le 0.01 -> 822, 0.025 -> 843 (of 843)
    q = quantiles_ms(page("after_load").histograms["itl"])
    assert q is not None
    assert q.p50 == pytest.approx(10.0 * 421.5 / 822)  # rank 421.5 in (0, 0.01]
    assert q.p99 == pytest.approx(10.0 + 15.0 * (834.57 - 822) / 21)  # in (0.01, 0.025]


def test_increase_between_two_scrapes_of_one_server() -> None:
    # TTFT after_prefix_load - after_load: le 0.06 -> 1, 0.08 -> 1, 0.1 -> 16 (of 16)
    step = increase(
        page("after_prefix_load").histograms["ttft"], page("after_load").histograms["ttft"]
    )
    assert step is not None and step.count == 16
    q = quantiles_ms(step)
    assert q is not None
    assert q.p50 == pytest.approx(80.0 + 20.0 * 7 / 15)  # rank 8 in (0.08, 0.1]
    assert q.p90 == pytest.approx(80.0 + 20.0 * 13.4 / 15)
    assert q.p99 == pytest.approx(80.0 + 20.0 * 14.84 / 15)
    assert q.mean == pytest.approx((1.7208154201507568 - 0.3710448741912842) / 16 * 1000)


def test_counter_reset_takes_the_new_counts_whole() -> None:
    # after_pressure is a new server: 24 requests, le 0.1 -> 10, 2.5 -> 23, 5.0 -> 24
    before = page("after_prefix_load").histograms["ttft"]
    after = page("after_pressure").histograms["ttft"]
    step = increase(after, before)
    assert step == after  # not after - before (which would go negative)
    q = quantiles_ms(step)
    assert q is not None
    assert q.p50 == pytest.approx(1000.0 + 1500.0 * 2 / 13)  # rank 12 in (1.0, 2.5]
    assert q.p90 == pytest.approx(1000.0 + 1500.0 * 11.6 / 13)
    assert q.p99 == pytest.approx(2500.0 + 2500.0 * 0.76)  # rank 23.76 in (2.5, 5.0]


def test_reset_seen_by_the_created_stamp_alone() -> None:
    before = Histogram((0.1, 1.0, INF), (1.0, 2.0, 2.0), 0.5, created=100.0)
    # A restarted server that already served more than the old one: counts went up.
    after = Histogram((0.1, 1.0, INF), (3.0, 5.0, 5.0), 2.0, created=200.0)
    assert increase(after, before) == after
    same_server = Histogram((0.1, 1.0, INF), (3.0, 5.0, 5.0), 2.0, created=100.0)
    step = increase(same_server, before)
    assert step is not None and step.counts == (2.0, 3.0, 3.0) and step.sum == 1.5


def test_window_sums_increases_across_a_restart_and_slides() -> None:
    window = HistogramWindow(60.0)
    window.observe(0.0, page("after_load").histograms["ttft"])
    assert window.total(0.0) is None  # one scrape: no increase yet
    window.observe(10.0, page("after_prefix_load").histograms["ttft"])
    window.observe(20.0, page("after_pressure").histograms["ttft"])
    total = window.total(20.0)
    # 16 from the first server's step + 24 from the restarted one: le 0.06 -> 2, 0.1 -> 26
    assert total is not None and total.count == 40
    assert bucket_quantile(0.5, total) == pytest.approx(0.08 + 0.02 * 18 / 24)
    # 55 s later the first step (t=10) has left the window, the restart's (t=20) has not
    later = window.total(75.0)
    assert later is not None and later.count == 24
    # and after 80 s nothing is left in it: an empty histogram, no quantiles
    empty = window.total(80.0)
    assert empty is not None and empty.count == 0 and bucket_quantile(0.5, empty) is None


def test_tracker_reports_every_family_and_an_unbounded_span() -> None:
    run = LatencyTracker(window_s=None)
    run.observe(5.0, page("after_load").histograms)
    run.observe(35.0, page("after_prefix_load").histograms)
    latency = run.latency()
    assert latency.window_s == 30.0
    assert latency.ttft is not None and latency.ttft.count == 16
    assert latency.ttft.p50 == pytest.approx(80.0 + 20.0 * 7 / 15)
    assert latency.queue is not None and latency.queue.count == 16
    # queue after_prefix_load - after_load: all 16 in (0, 0.3]: p50 = 0.3 * 8/16
    assert latency.queue.p50 == pytest.approx(150.0)
    assert latency.e2el is not None and latency.e2el.count == 16
    # e2e: the 16 new ones all in (0.5, 0.8]: 0.5 + 0.3 * 8/16
    assert latency.e2el.p50 == pytest.approx(650.0)


def test_promql_edge_cases() -> None:
    hist = histogram_from_buckets([(1.0, 1.0), (2.0, 2.0), (INF, 10.0)])
    # rank 9.9 falls in the +Inf bucket: the highest finite bound, as PromQL returns
    assert bucket_quantile(0.99, hist) == 2.0
    assert bucket_quantile(-0.1, hist) == -INF
    assert bucket_quantile(1.1, hist) == INF
    assert bucket_quantile(math.nan, hist) is None
    no_inf = histogram_from_buckets([(1.0, 1.0), (2.0, 2.0)])
    assert bucket_quantile(0.5, no_inf) is None
    assert bucket_quantile(0.5, histogram_from_buckets([(INF, 3.0)])) is None  # < 2 buckets
    negative = histogram_from_buckets([(-1.0, 5.0), (0.0, 6.0), (INF, 10.0)])
    assert bucket_quantile(0.2, negative) == -1.0  # lowest bound <= 0 is returned as is
    # a non-monotonic scrape (buckets read at different instants) is forced monotonic
    bumpy = Histogram((1.0, 2.0, INF), (4.0, 3.0, 4.0))
    assert bucket_quantile(0.5, bumpy) == pytest.approx(0.5)


def test_engines_are_summed_by_le() -> None:
    merged = histogram_from_buckets([(0.1, 1.0), (INF, 2.0), (0.1, 3.0), (INF, 4.0)])
    assert merged.bounds == (0.1, INF) and merged.counts == (4.0, 6.0)


def test_bucket_around_and_largest_observed() -> None:
    ttft = page("after_load").histograms["ttft"]
    assert bucket_around(ttft, 0.02) == (0.01, 0.02)
    assert bucket_around(ttft, 0.021) == (0.02, 0.04)
    assert largest_observed(ttft) == 0.04
    assert largest_observed(page("fresh_idle").histograms["ttft"]) is None
    assert page("after_load").largest_request_tokens is not None


def test_run_telemetry_summarises_the_load_span_and_keeps_a_series() -> None:
    from tui.domain.run_telemetry import RunTelemetry
    from tui.telemetry.vllm_metrics import server_metrics

    run = RunTelemetry(launched_t=0.0)
    idle = server_metrics(page("after_load", t=10.0))
    run.on_metrics(idle)
    assert run.load_finished() is None  # no load yet
    run.load_started()  # from the newest good scrape (t=10) on
    busy = server_metrics(page("after_prefix_load", t=40.0))
    run.on_metrics(busy)
    latency = run.load_finished()
    assert latency is not None and latency.window_s == 30.0
    assert latency.ttft is not None and latency.ttft.count == 16
    assert latency.ttft.p50 == pytest.approx(80.0 + 20.0 * 7 / 15)
    points = run.series()
    assert [round(p.t) for p in points] == [10, 40]
    assert points[0].kv_cache_usage is not None


def test_a_quantile_the_buckets_cannot_place_comes_with_its_bound() -> None:
    """Queue times near 0 all land in vLLM's first bucket (0, 0.3]: PromQL interpolates
    150/270/297 ms from 0; the bound says what the histogram knows (< 300 ms)."""
    first = histogram_from_buckets([(0.3, 40.0), (0.5, 40.0), (math.inf, 40.0)])
    q = quantiles_ms(first)
    assert q is not None and q.p50 == pytest.approx(150.0)
    assert q.p50_bound == q.p99_bound == QuantileBound(lower=0.0, upper=300.0)
    # every observation in one middle bucket: the bucket is all the histogram knows
    middle = histogram_from_buckets([(0.04, 0.0), (0.06, 0.0), (0.08, 10.0), (math.inf, 10.0)])
    assert quantile_bound(0.5, middle) == QuantileBound(lower=0.06, upper=0.08)
    # spread over several buckets: interpolation stands, no bound
    spread = histogram_from_buckets([(0.04, 2.0), (0.06, 6.0), (0.08, 10.0), (math.inf, 10.0)])
    assert quantile_bound(0.5, spread) is None and quantile_bound(0.9, spread) is None
    # past the last finite bound: "more than"
    tail = histogram_from_buckets([(0.04, 2.0), (0.06, 6.0), (math.inf, 10.0)])
    assert quantile_bound(0.99, tail) == QuantileBound(lower=0.06, upper=math.inf)
    assert quantile_bound(0.5, histogram_from_buckets([(0.1, 0.0), (math.inf, 0.0)])) is None
