"""The strategies: ``auto_tune`` (auto_tune.sh step for step), ``grid``, ``search``, ``twin``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol

from tui.domain.sweep.spec import STRATEGIES, StrategyName
from tui.tune.context import SweepContext
from tui.tune.decisions import Decision


class Strategy(Protocol):
    """Decides which trials to run, given what the earlier ones measured."""

    def run(self, ctx: SweepContext) -> AsyncIterator[Decision]:
        """Run trials through ``ctx`` until done (raises ``SweepStopped``/``BudgetSpent``),
        yielding what it decides besides them (the sweep run applies it to ``ctx``)."""
        ...


def _auto_tune() -> Strategy:
    from tui.tune.strategies.auto_tune import AutoTune

    return AutoTune()


def _grid() -> Strategy:
    from tui.tune.strategies.grid import Grid

    return Grid()


def _search() -> Strategy:
    from tui.tune.strategies.search import Search  # optuna: imported only when searching

    return Search()


def _twin() -> Strategy:
    from tui.tune.strategies.twin import TwinFirst

    return TwinFirst()


REGISTRY: dict[StrategyName, Callable[[], Strategy]] = {
    "auto_tune": _auto_tune,
    "grid": _grid,
    "search": _search,
    "twin": _twin,
}
"""One factory per name of ``StrategyName`` (the declaration; a test checks they agree)."""


def make_strategy(name: str) -> Strategy:
    """The strategy called ``name``."""
    for known, factory in REGISTRY.items():
        if known == name:
            return factory()
    names = f"{', '.join(STRATEGIES[:-1])} or {STRATEGIES[-1]}"
    raise ValueError(f"unknown strategy {name!r}: {names}")
