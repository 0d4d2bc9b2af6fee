"""Strategies are declared once (``StrategyName``); every list of them derives from it."""

from __future__ import annotations

import pytest

from tui.app.cli import _parser
from tui.domain.sweep.spec import STRATEGIES, STRATEGY_LABELS, StrategyName, SweepSpec
from tui.tune.strategies import REGISTRY, make_strategy
from tui.tune.strategies.auto_tune import AutoTune
from tui.tune.strategies.grid import Grid
from tui.tune.strategies.search import Search
from tui.tune.strategies.twin import TwinFirst


def test_every_list_of_strategies_is_the_declared_one() -> None:
    assert STRATEGIES == ("auto_tune", "grid", "search", "twin")
    assert set(REGISTRY) == set(STRATEGIES) == set(STRATEGY_LABELS)
    sweep = _parser()._subparsers._group_actions[0].choices["sweep"]  # type: ignore[union-attr]
    (strategy,) = [a for a in sweep._actions if a.dest == "strategy"]
    assert tuple(strategy.choices) == STRATEGIES
    assert SweepSpec.model_fields["strategy"].annotation == StrategyName


@pytest.mark.parametrize(
    ("name", "kind"),
    [("auto_tune", AutoTune), ("grid", Grid), ("search", Search), ("twin", TwinFirst)],
)
def test_each_name_makes_its_strategy(name: str, kind: type) -> None:
    assert isinstance(make_strategy(name), kind)


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    known = r"auto_tune, grid, search or twin"
    with pytest.raises(ValueError, match=rf"unknown strategy 'bayes': {known}"):
        make_strategy("bayes")
