"""The strategies: ``auto_tune`` (auto_tune.sh step for step), ``grid``, ``search``."""

from __future__ import annotations

from typing import Protocol

from tui.tune.context import SweepContext


class Strategy(Protocol):
    """Decides which trials to run, given what the earlier ones measured."""

    async def run(self, ctx: SweepContext) -> None:
        """Run trials through ``ctx`` until done (raises ``SweepStopped``/``BudgetSpent``)."""
        ...


def make_strategy(name: str) -> Strategy:
    """The strategy called ``name``."""
    from tui.tune.strategies.auto_tune import AutoTune
    from tui.tune.strategies.grid import Grid
    from tui.tune.strategies.search import Search

    strategies: dict[str, Strategy] = {"auto_tune": AutoTune(), "grid": Grid(), "search": Search()}
    try:
        return strategies[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}: auto_tune, grid or search") from None
