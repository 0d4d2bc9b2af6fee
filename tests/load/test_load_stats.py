"""bench serve's statistics against numbers worked out by hand (ref section 4.2).

The synthetic run used throughout (times in seconds, dur = 2.0 s):

    req  success  prompt  out  ttft  itl               latency  start
    R1   yes      10      4    0.1   [0.02,0.03,0.05]  0.2      100.0
    R2   yes      20      3    0.2   [0.04,0.06]       0.3      100.9
    R3   yes      5       1    0.3   []                0.3      101.2
    R4   no       7       -    -     -                 -        100.1  (error "boom")
"""

from __future__ import annotations

import math

import pytest

from tui.load.report import build_result
from tui.load.stats import (
    RequestRecord,
    actual_output_len,
    calculate_metrics,
    detailed_fields,
    latency_stats,
    parse_goodput,
    peak_rates,
    percentile_key,
    summarize,
    validate_goodput,
)


def records() -> list[RequestRecord]:
    return [
        RequestRecord(True, 10, 4, 0.1, [0.02, 0.03, 0.05], 0.2, "", 100.0),
        RequestRecord(True, 20, 3, 0.2, [0.04, 0.06], 0.3, "", 100.9),
        RequestRecord(True, 5, 1, 0.3, [], 0.3, "", 101.2),
        RequestRecord(False, 7, 0, 0.0, [], 0.0, "boom", 100.1),
    ]


DUR = 2.0


def test_counts_and_throughputs_exclude_failed_requests() -> None:
    m = calculate_metrics(records(), DUR)
    assert m.completed == 3
    assert m.failed == 1
    assert m.total_input == 35  # 10 + 20 + 5; R4's 7 is not counted
    assert m.total_output == 8  # 4 + 3 + 1
    assert m.actual_output_lens == [4, 3, 1, 0]
    assert m.request_throughput == pytest.approx(1.5)  # 3 / 2
    assert m.output_throughput == pytest.approx(4.0)  # 8 / 2
    assert m.total_token_throughput == pytest.approx(21.5)  # (35 + 8) / 2


def test_ttft_statistics() -> None:
    stats = latency_stats(calculate_metrics(records(), DUR), [50, 90, 99], ["ttft"])
    # TTFTs 100, 200, 300 ms.
    assert stats["mean_ttft_ms"] == pytest.approx(200.0)
    assert stats["median_ttft_ms"] == pytest.approx(200.0)
    # population std: sqrt((100² + 0 + 100²) / 3) = sqrt(20000/3)
    assert stats["std_ttft_ms"] == pytest.approx(81.64965809277261)
    assert stats["p50_ttft_ms"] == pytest.approx(200.0)
    # linear interpolation: rank 0.9·(3−1) = 1.8 -> 200 + 0.8·100
    assert stats["p90_ttft_ms"] == pytest.approx(280.0)
    assert stats["p99_ttft_ms"] == pytest.approx(298.0)  # rank 1.98


def test_tpot_only_for_outputs_longer_than_one() -> None:
    m = calculate_metrics(records(), DUR)
    # R1: (0.2 − 0.1)/(4 − 1) = 33.333 ms; R2: (0.3 − 0.2)/(3 − 1) = 50 ms; R3 skipped.
    assert len(m.tpots) == 2
    stats = latency_stats(m, [90, 99], ["tpot"])
    assert stats["mean_tpot_ms"] == pytest.approx(125.0 / 3)  # (33.333 + 50)/2
    assert stats["median_tpot_ms"] == pytest.approx(125.0 / 3)
    assert stats["std_tpot_ms"] == pytest.approx(25.0 / 3)  # half the spread 16.667
    assert stats["p90_tpot_ms"] == pytest.approx(100.0 / 3 + 0.9 * 50.0 / 3)  # 48.333
    assert stats["p99_tpot_ms"] == pytest.approx(100.0 / 3 + 0.99 * 50.0 / 3)  # 49.833


def test_itls_are_concatenated_across_requests() -> None:
    stats = latency_stats(calculate_metrics(records(), DUR), [50, 90, 99, 99.9], ["itl"])
    # ITLs 20, 30, 50, 40, 60 ms -> sorted 20 30 40 50 60
    assert stats["mean_itl_ms"] == pytest.approx(40.0)
    assert stats["median_itl_ms"] == pytest.approx(40.0)
    assert stats["std_itl_ms"] == pytest.approx(math.sqrt(200.0))  # (400+100+0+100+400)/5
    assert stats["p90_itl_ms"] == pytest.approx(56.0)  # rank 3.6 -> 50 + 0.6·10
    assert stats["p99_itl_ms"] == pytest.approx(59.6)  # rank 3.96
    assert stats["p99.9_itl_ms"] == pytest.approx(59.96)  # rank 3.996


def test_e2el_statistics() -> None:
    stats = latency_stats(calculate_metrics(records(), DUR), [50, 90], ["e2el"])
    # E2ELs 200, 300, 300 ms
    assert stats["mean_e2el_ms"] == pytest.approx(800.0 / 3)
    assert stats["median_e2el_ms"] == pytest.approx(300.0)
    # deviations −66.667, 33.333, 33.333: variance (4444.4 + 1111.1 + 1111.1)/3 = 2222.2
    assert stats["std_e2el_ms"] == pytest.approx(math.sqrt(20000.0 / 9))
    assert stats["p90_e2el_ms"] == pytest.approx(300.0)  # rank 1.8 between 300 and 300


def test_goodput_every_given_slo_must_hold() -> None:
    # ttft ≤ 250 and tpot ≤ 40: R1 (100, 33.3) good; R2 tpot 50 bad; R3 ttft 300 bad.
    assert calculate_metrics(records(), DUR, goodput={"ttft": 250, "tpot": 40}).request_goodput == (
        pytest.approx(0.5)
    )
    # tpot ≤ 0: only R3, whose single-token TPOT counts as 0 for goodput.
    assert calculate_metrics(records(), DUR, goodput={"tpot": 0}).request_goodput == (
        pytest.approx(0.5)
    )
    # e2el ≤ 300: 200, 300, 300 all pass (the bound is inclusive) -> 3/2.
    assert calculate_metrics(records(), DUR, goodput={"e2el": 300}).request_goodput == (
        pytest.approx(1.5)
    )


def test_goodput_is_none_in_the_result_without_slos() -> None:
    assert build_result(records(), DUR).request_goodput is None
    assert build_result(records(), DUR, goodput={"ttft": 250}).request_goodput == (
        pytest.approx(1.0)  # R1, R2 -> 2/2
    )


def test_goodput_validation() -> None:
    with pytest.raises(ValueError, match="should be one of"):
        validate_goodput({"itl": 5})
    with pytest.raises(ValueError, match="non-negative"):
        validate_goodput({"ttft": -1})
    assert parse_goodput(["ttft:200", "tpot:50"]) == {"ttft": 200.0, "tpot": 50.0}
    with pytest.raises(ValueError, match="KEY:VALUE"):
        parse_goodput(["ttft=200"])
    with pytest.raises(ValueError, match="KEY:VALUE"):
        parse_goodput(["ttft:fast"])


def test_peak_rates_count_chunks_and_touched_seconds() -> None:
    # Buckets from 100.0: R1 chunks at 0.1, 0.12, 0.15, 0.2 -> bucket 0 gets 4;
    # R2 at 1.1, 1.14, 1.2 and R3 at 1.5 -> bucket 1 gets 4. Peak 4 chunks/s.
    # R1 touches second 0, R2 (0.9..1.2) seconds 0 and 1, R3 second 1 -> peak 2,
    # although no two of them ever overlap in time.
    successes = [r for r in records() if r.success]
    assert peak_rates(successes) == (4.0, 2)
    m = calculate_metrics(records(), DUR)
    assert (m.max_output_tokens_per_s, m.max_concurrent_requests) == (4.0, 2)


def test_missing_usage_counts_one_token_or_uses_the_counter() -> None:
    rec = RequestRecord(True, 3, 0, 0.1, [0.1], 0.2, "", 0.0, generated_text="a b c")
    assert calculate_metrics([rec], 1.0).total_output == 1  # no tokenizer: 1
    m = calculate_metrics([rec], 1.0, count_tokens=lambda text: len(text.split()))
    assert m.total_output == 3
    assert m.tpots == [pytest.approx(0.05)]  # (0.2 − 0.1)/(3 − 1)


def test_empty_and_all_failed_give_zeros() -> None:
    failed = [RequestRecord(False, 5, 0, 0.0, [], 0.0, "x", 1.0)]
    result = build_result(failed, 1.0)
    assert (result.completed, result.failed, result.total_input_tokens) == (0, 1, 0)
    assert result.request_throughput == 0.0
    assert result.stats and all(value == 0.0 for value in result.stats.values())
    assert result.errors == ["x"]
    assert result.max_output_tokens_per_s == 0.0  # type: ignore[attr-defined]
    assert summarize([], [99]) == {"mean": 0.0, "median": 0.0, "std": 0.0, "99": 0.0}


def test_zero_duration_gives_zero_throughput_and_negative_is_refused() -> None:
    assert calculate_metrics(records(), 0.0).request_throughput == 0.0
    with pytest.raises(ValueError, match="duration"):
        calculate_metrics(records(), -1.0)


def test_percentile_key_naming() -> None:
    assert percentile_key(99, "ttft") == "p99_ttft_ms"
    assert percentile_key(99.0, "itl") == "p99_itl_ms"
    assert percentile_key(99.9, "tpot") == "p99.9_tpot_ms"
    assert percentile_key(50, "e2el") == "p50_e2el_ms"


def test_result_keys_follow_bench_serve() -> None:
    result = build_result(records(), DUR, percentiles=[50, 99.9], percentile_metrics=["ttft"])
    assert set(result.stats) == {
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p50_ttft_ms",
        "p99.9_ttft_ms",
    }
    default = build_result(records(), DUR)
    expected = {
        f"{kind}_{m}_ms"
        for m in ("ttft", "tpot", "itl", "e2el")
        for kind in ("mean", "median", "std", "p50", "p90", "p99")
    }
    assert set(default.stats) == expected
    flat = default.to_bench_json()
    assert flat["completed"] == 3 and flat["failed"] == 1
    assert flat["request_rate"] == "inf"
    assert flat["max_concurrent_requests"] == 2
    assert flat["p99_itl_ms"] == pytest.approx(59.6)


def test_bad_statistics_options_are_refused() -> None:
    m = calculate_metrics(records(), DUR)
    with pytest.raises(ValueError, match="between 0 and 100"):
        latency_stats(m, [101])
    with pytest.raises(ValueError, match="unknown percentile metric"):
        latency_stats(m, [99], ["queue"])


def test_detailed_fields_have_one_entry_per_request() -> None:
    recs = records()
    recs[2].output_tokens = 0  # R3 without usage: its text is counted instead
    recs[2].generated_text = "a b"
    recs[0].queue_time = 0.5
    details = detailed_fields(recs, count_tokens=lambda text: len(text.split()))
    assert details["input_lens"] == [10, 20, 5, 7]
    assert details["output_lens"] == [4, 3, 2, 0]  # failed -> 0, as actual_output_lens
    assert details["ttfts"] == [0.1, 0.2, 0.3, 0.0]
    assert details["itls"] == [[0.02, 0.03, 0.05], [0.04, 0.06], [], []]
    assert details["latencies"] == [0.2, 0.3, 0.3, 0.0]
    assert details["start_times"] == [100.0, 100.9, 101.2, 100.1]
    assert details["queue_times"] == [0.5, 0.0, 0.0, 0.0]
    assert details["errors"] == ["", "", "", "boom"]
    assert len(details["generated_texts"]) == 4
    assert actual_output_len(recs[2]) == 1  # no counter: 1, as bench serve without tokenizer
