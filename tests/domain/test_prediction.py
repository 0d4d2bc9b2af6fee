"""A prediction says it is one, with its profile and error, and flags a miss."""

from __future__ import annotations

import math

import pytest

from tui.domain.prediction import (
    MISS_FLOOR_PCT,
    ErrorSource,
    MetricInterval,
    Prediction,
    TwinMetric,
    covering,
    twin_label,
)


def _interval(metric: TwinMetric, pct: float) -> MetricInterval:
    return MetricInterval(metric=metric, interval_pct=pct, median_pct=pct / 2, worst_pct=2 * pct)


def _pred(**kw) -> Prediction:  # type: ignore[no-untyped-def]
    base = dict(
        profile="h100 r2",
        error_pct=7.0,
        error_source=ErrorSource.VALIDATION,
        starts=True,
        kv_tokens=131072,
        output_throughput=1000.0,
        p99_ttft_ms=120.0,
        mean_e2el_ms=2000.0,
        p99_e2el_ms=2100.0,
    )
    return Prediction(**{**base, **kw})


def test_every_figure_is_labelled_predicted_with_its_profile_and_error() -> None:
    p = _pred()
    assert p.label() == "predicted (twin h100 r2, ±7% validation)"
    assert p.line() == (
        "predicted (twin h100 r2, ±7% validation): starts, KV 131,072 tok · 1,000 tok/s · "
        "p99 TTFT 120 ms · p99 E2EL 2.10 s"
    )
    other = _pred(caveat="vLLM 0.33.0 (profile: 0.32.0)")
    assert other.label().endswith("; profile of another server: vLLM 0.33.0 (profile: 0.32.0))")


def test_each_figure_states_its_own_metrics_interval_or_that_it_is_not_validated() -> None:
    p = _pred(
        intervals=(
            _interval(TwinMetric.OUTPUT_THROUGHPUT, 8.0),
            _interval(TwinMetric.P99_TTFT, 22.0),
            _interval(TwinMetric.MEAN_E2EL, 30.0),
        )
    )
    assert p.interval(TwinMetric.OUTPUT_THROUGHPUT) == 8.0
    assert p.interval(TwinMetric.P99_E2EL) is None
    assert p.line().endswith(
        "1,000 tok/s ±8% · p99 TTFT 120 ms ±22% · p99 E2EL 2.10 s (not validated)"
    )
    # A miss is judged per metric: throughput 15 % off is outside its own ±8% (and the floor).
    assert p.missed(1000.0 / 1.15, 2000.0)
    assert not p.missed(1000.0, 2000.0 * 1.25)  # E2EL inside its own ±30%
    # A fit-only profile's figures state no interval: none was measured out of sample.
    fit = _pred(error_source=ErrorSource.FIT, intervals=p.intervals)
    assert fit.interval(TwinMetric.OUTPUT_THROUGHPUT) is None
    assert p.model_validate_json(p.model_dump_json()) == p


def test_the_label_names_where_its_error_was_measured() -> None:
    # A record saved before validation existed carried a fit's median: it says so.
    old = Prediction.model_validate({"profile": "h100 r1", "error_pct": 7.0, "starts": True})
    assert old.label() == "predicted (twin h100 r1, ±7% fit only)"
    assert twin_label("cold", None, ErrorSource.UNFITTED) == "predicted (twin cold, not fitted yet)"
    assert twin_label("x r1", float("inf"), ErrorSource.VALIDATION).endswith("error unknown)")


def test_a_command_that_would_not_start_says_why_in_vllms_words() -> None:
    p = _pred(starts=False, failure="To serve one request (1 GiB).\nThe estimate is 1920.")
    assert p.line().endswith("will NOT start: To serve one request (1 GiB). The estimate is 1920.")
    assert len(_pred(starts=False, failure="x " * 400).line()) < 300


def test_a_miss_beyond_the_profiles_error_is_flagged() -> None:
    p = _pred(error_pct=12.0)
    assert p.miss_pct(1000.0, 2000.0) == 0.0
    assert not p.missed(900.0, 2000.0)  # 11 %: inside the profile's 12 %
    assert p.missed(1000.0, 1600.0)  # E2EL 25 % off
    assert "recalibrate" in p.versus(1000.0, 1600.0)
    tight = _pred(error_pct=1.0)
    assert not tight.missed(1000.0 / (1 + (MISS_FLOOR_PCT - 1) / 100), 2000.0)
    assert p.miss_pct(None, None) is None
    assert (
        p.versus(None, None)
        == "predicted (twin h100 r2, ±12% validation): 1,000 tok/s, E2EL 2.00 s"
    )
    assert p.model_validate_json(p.model_dump_json()) == p
    with pytest.raises(ValueError):
        Prediction.model_validate({"profile": "x"})


def test_the_board_table_shows_the_prediction_beside_the_measurement() -> None:
    from tui.domain.board.table import ColumnKind, build_table
    from tui.domain.flags.serve import ServeFlags
    from tui.domain.results import BenchResult, RunRecord, RunStatus

    bench = BenchResult(completed=10, output_throughput=700.0, stats={"mean_e2el_ms": 2000.0})
    run = RunRecord(
        id=1,
        label="#1",
        flags=ServeFlags(model="m"),
        status=RunStatus.READY,
        bench=bench,
        prediction=_pred(),
    )
    plain = RunRecord(id=2, label="#2", flags=ServeFlags(model="m"), status=RunStatus.READY)
    table = build_table([run, plain])
    (col,) = [c for c in table.columns if c.kind is ColumnKind.PREDICTED]
    i = table.columns.index(col)
    text = table.rows[0].cells[i].text
    assert text == "! 1,000 tok/s predicted (twin h100 r2, ±7% validation); off 43%"
    assert table.rows[1].cells[i].text == ""
    # A profile that measured throughput's own interval: the figure carries it.
    sharp = run.model_copy(
        update={"prediction": _pred(intervals=(_interval(TwinMetric.OUTPUT_THROUGHPUT, 8.0),))}
    )
    (row,) = build_table([sharp]).rows
    assert row.cells[i].text.startswith("! 1,000 tok/s ±8% predicted (twin h100 r2")
    assert not any(c.kind is ColumnKind.PREDICTED for c in build_table([plain]).columns)


def test_the_stated_interval_covers_four_new_outcomes_in_five() -> None:
    # Nine errors scored out of sample: a new one is below the k-th smallest with
    # probability k/10, so four in five needs the 8th (a plain 80th percentile, 7.4, is not).
    assert covering([float(e) for e in range(9, 0, -1)]) == 8.0
    assert covering([3.0, 1.0, 2.0]) == 3.0  # too few for the rank: the largest
    assert covering([math.inf, 5.0]) == 5.0 and math.isnan(covering([]))
