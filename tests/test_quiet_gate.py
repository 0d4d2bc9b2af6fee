"""The benchmarks' shared gate: a busy machine's figure is not valid, a missed goal fails."""

from __future__ import annotations

import pytest

from benchmarks import _quiet
from benchmarks._quiet import QuietGate, Verdict


def _gate(monkeypatch: pytest.MonkeyPatch, loads: list[float]) -> QuietGate:
    it = iter(loads)
    monkeypatch.setattr(_quiet, "load_now", lambda: next(it))
    return QuietGate("t", before=next(it))


def test_quiet_and_met_exits_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _gate(monkeypatch, [0.3, 0.4, 0.4])
    assert gate.check("error", 0.08, goal=0.10)
    assert gate.finish() == Verdict.MET


def test_a_missed_goal_exits_non_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _gate(monkeypatch, [0.3, 0.4, 0.4])
    assert not gate.check("ratio", 0.4, goal=0.5, higher_is_better=True)
    assert gate.finish() == Verdict.MISSED


def test_a_busy_machine_makes_the_figure_not_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _gate(monkeypatch, [0.3, 2.7, 0.4, 0.4])
    gate.sample()
    assert gate.check("error", 0.01, goal=0.10)
    assert gate.finish() == Verdict.NOT_VALID
