"""The twin benchmarks' reference server and judgement: the spread, the coverage, the goals."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import _quiet
from benchmarks._quiet import QuietGate, Verdict
from benchmarks._reference import RepeatSpread, reference_model, spread_of
from benchmarks.sim_fidelity import (
    GOALS,
    INTERVAL_METRICS,
    MEDIAN_GOALS,
    WORST_GOALS,
    coverage_pct,
    judge,
    rank_correlation,
)
from tui.domain.results import BenchResult
from tui.domain.workload import LoadSpec
from tui.server.provision import VLLM_VERSION, ProvisionedVllm
from tui.twin.fidelity import CaseResult, HeldOut


def _result(throughput: float, e2el: float, ttft: float) -> BenchResult:
    stats = {"mean_e2el_ms": e2el, "mean_ttft_ms": ttft}
    return BenchResult(completed=8, output_throughput=throughput, stats=stats)


def test_the_floor_is_the_median_deviation_from_the_mean() -> None:
    runs = [_result(t, 1000.0, 50.0) for t in (90.0, 100.0, 110.0)]
    spread = spread_of(runs)
    # Deviations from the mean (100): 10, 0, 10 -> median 10 %; range 20 %.
    assert spread.floor_pct("output_throughput") == pytest.approx(10.0)
    assert spread.range_pct("output_throughput") == pytest.approx(20.0)
    assert spread.floor_pct("mean_e2el_ms") == 0.0  # identical runs: no floor
    assert "the floor no twin can beat" in spread.report()


def test_one_run_has_no_spread() -> None:
    spread = RepeatSpread({"output_throughput": [100.0]})
    assert math.isnan(spread.floor_pct("output_throughput"))
    assert math.isnan(spread.range_pct("output_throughput"))


def test_the_reference_model_is_the_small_one_unless_asked(tmp_path: Path) -> None:
    root = tmp_path / "models"
    found = ProvisionedVllm(
        venv=tmp_path,
        python=tmp_path / "python",
        vllm=tmp_path / "vllm",
        model=root / "tiny-llama",
        model_long=root / "tiny-llama-long",
        model_small=root / "small-llama",
        version=VLLM_VERSION,
    )
    assert reference_model(found, "small") == root / "small-llama"
    assert reference_model(found, "tiny") == root / "tiny-llama"
    assert reference_model(found, str(tmp_path / "other")) == tmp_path / "other"


class _Twin:
    """A prediction of fixed figures (what CaseResult.error reads of a twin run)."""

    def __init__(self, figures: dict[str, float]) -> None:
        self.figures = figures

    def metric(self, key: str) -> float:
        return self.figures[key]


def _case(real: BenchResult, factor: float) -> CaseResult:
    """A held-out case whose twin predicts ``factor`` x the real figures."""
    load = LoadSpec(input_len=64, output_len=32, num_prompts=8)
    r = CaseResult(HeldOut("c", (), load), real=[real])
    r.twin = _Twin({k: factor * (real.metric(k) or 0.0) for k in GOALS})  # type: ignore[assignment]
    return r


def _quiet_gate(monkeypatch: pytest.MonkeyPatch) -> QuietGate:
    monkeypatch.setattr(_quiet, "load_now", lambda: 0.2)
    return QuietGate("t", before=0.2)


def test_coverage_counts_outcomes_inside_each_metrics_stated_interval() -> None:
    real = _result(100.0, 1000.0, 50.0)
    results = [_case(real, 1.05), _case(real, 1.30)]
    covered = coverage_pct(results, interval_pct=dict.fromkeys(GOALS, 10.0))
    assert set(covered) == set(GOALS)
    assert all(c == (pytest.approx(50.0), 2) for c in covered.values())
    # Each metric against its own interval: the 30 % miss is inside a throughput +-40 %.
    wider = {**dict.fromkeys(GOALS, 10.0), "output_throughput": 40.0}
    assert coverage_pct(results, wider)["output_throughput"][0] == pytest.approx(100.0)
    # A metric without an interval (not validated) is not counted.
    assert "mean_ttft_ms" not in coverage_pct(results, {**wider, "mean_ttft_ms": None})


def test_the_rank_correlation_says_whether_a_sweep_can_trust_the_ranking() -> None:
    results = []
    for real_tput, predicted in ((100.0, 90.0), (200.0, 210.0), (300.0, 250.0), (400.0, 500.0)):
        r = _case(_result(real_tput, 1000.0, 50.0), 1.0)
        r.twin = _Twin({"output_throughput": predicted})  # type: ignore[assignment]
        results.append(r)
    assert rank_correlation(results) == (pytest.approx(1.0), 4)
    results[0].twin = _Twin({"output_throughput": 450.0})  # type: ignore[assignment]
    rho, n = rank_correlation(results)
    assert n == 4 and rho < 0.5
    assert math.isnan(rank_correlation(results[:2])[0])  # too few to rank


def test_a_twin_within_the_goals_meets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _quiet_gate(monkeypatch)
    real = _result(100.0, 1000.0, 50.0)
    judge(gate, [_case(real, f) for f in (1.02, 0.97, 1.05)], dict.fromkeys(GOALS, 8.0), None)
    assert gate.finish() == Verdict.MET


@pytest.mark.parametrize("factor", [3.0, 1 / 3])
def test_a_broken_twin_misses_them(monkeypatch: pytest.MonkeyPatch, factor: float) -> None:
    gate = _quiet_gate(monkeypatch)
    real = _result(100.0, 1000.0, 50.0)
    judge(gate, [_case(real, factor)] * 3, dict.fromkeys(GOALS, 8.0), None)
    assert gate.finish() == Verdict.MISSED
    # every median and worst, and each interval's coverage (their widths were met)
    assert len(gate.missed) == len(MEDIAN_GOALS) + len(WORST_GOALS) + len(INTERVAL_METRICS)


def test_an_interval_that_holds_too_few_outcomes_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _quiet_gate(monkeypatch)
    real = _result(100.0, 1000.0, 50.0)
    judge(gate, [_case(real, f) for f in (1.02, 1.04, 1.06)], dict.fromkeys(GOALS, 3.0), None)
    assert gate.finish() == Verdict.MISSED
    assert gate.missed == [
        "coverage of the stated tok/s interval %",
        "coverage of the stated E2EL interval %",
    ]


def test_an_interval_too_wide_to_act_on_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _quiet_gate(monkeypatch)
    real = _result(100.0, 1000.0, 50.0)
    judge(gate, [_case(real, f) for f in (1.02, 1.04, 1.06)], dict.fromkeys(GOALS, 40.0), None)
    assert gate.missed == ["stated tok/s interval ±%", "stated E2EL interval ±%"]
