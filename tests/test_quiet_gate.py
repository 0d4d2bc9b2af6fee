"""The benchmarks' shared gate: a busy machine's figure is not valid, a missed goal fails."""

from __future__ import annotations

import pytest

from benchmarks import _quiet
from benchmarks._quiet import SETTLE_POLL_S, QuietGate, Verdict


def _gate(monkeypatch: pytest.MonkeyPatch, loads: list[float]) -> tuple[QuietGate, list[float]]:
    """A gate reading ``loads`` in turn (the first is "before", then every read); the
    waits it makes are returned, not slept."""
    it = iter(loads)
    monkeypatch.setattr(_quiet, "load_now", lambda: next(it))
    waits: list[float] = []
    return QuietGate("t", before=next(it), own_load=2.0, wait=waits.append), waits


def test_quiet_and_met_exits_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    gate, waits = _gate(monkeypatch, [0.3, 0.4, 0.4])
    assert gate.check("error", 0.08, goal=0.10)
    assert gate.finish() == Verdict.MET
    assert waits == []  # quiet at once: nothing to wait for


def test_a_missed_goal_exits_non_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    gate, _ = _gate(monkeypatch, [0.3, 0.4, 0.4])
    assert not gate.check("ratio", 0.4, goal=0.5, higher_is_better=True)
    assert gate.finish() == Verdict.MISSED


def test_its_own_server_s_load_decays_before_after_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # its own server kept two cores busy (2.1 mid-run and at the end), then the average
    # decays once it stopped: valid, read after the decay
    gate, waits = _gate(monkeypatch, [0.3, 2.1, 2.0, 1.9, 1.7, 1.4])
    gate.sample()
    assert gate.check("error", 0.01, goal=0.10)
    assert gate.finish() == Verdict.MET
    assert gate.after == 1.4 and waits == [SETTLE_POLL_S] * 2


def test_a_load_that_stays_makes_the_figure_not_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    # another job kept running: the average never falls within the wait
    loads = [0.3, 2.1, 2.2] + [2.5] * 100
    gate, waits = _gate(monkeypatch, loads)
    gate.sample()
    assert gate.finish() == Verdict.NOT_VALID
    assert sum(waits) >= gate.settle_s


@pytest.mark.parametrize(
    "loads",
    [
        [1.8, 0.4, 0.4],  # busy before it started
        [0.3, 4.2, 0.4, 0.4],  # mid-run beyond what its own server can make
    ],
)
def test_a_busy_machine_makes_the_figure_not_valid(
    monkeypatch: pytest.MonkeyPatch, loads: list[float]
) -> None:
    gate, _ = _gate(monkeypatch, loads)
    if len(loads) > 3:
        gate.sample()
    assert gate.check("error", 0.01, goal=0.10)
    assert gate.finish() == Verdict.NOT_VALID
