"""Sweeps as pure models: the spec, its parameter space, SLO verdicts and trial outcomes.

- :mod:`.tunables`: the parameters a sweep may vary (``ServeFlags`` fields, plus the LoRA
  flags ``ServeFlags`` passes through as extra arguments) and how a choice becomes flags;
- :mod:`.spec`: :class:`SweepSpec`, what a ``presets/sweeps/*.toml`` file or the console's
  sweep form declares;
- :mod:`.slo`: limits on bench serve's numbers and the prefix-cache hit floor, the
  objective, and the verdict of one measurement;
- :mod:`.outcome`: trials, measurements and the sweep's status as the console shows it.

Pure: no I/O. Strategies and the lanes that start servers live in ``tui/tune``.
"""

from __future__ import annotations

from tui.domain.sweep.outcome import (
    Measurement,
    SweepState,
    SweepStatus,
    TrialOutcome,
    TrialState,
    best_trial,
)
from tui.domain.sweep.slo import Objective, SloLimits, SloVerdict
from tui.domain.sweep.spec import (
    AutoTuneOptions,
    Budget,
    GridOptions,
    ParamRange,
    SearchOptions,
    StrategyName,
    SweepBase,
    SweepSpec,
    SweepWorkload,
    TwinOptions,
)

__all__ = [
    "AutoTuneOptions",
    "Budget",
    "GridOptions",
    "Measurement",
    "Objective",
    "ParamRange",
    "SearchOptions",
    "SloLimits",
    "SloVerdict",
    "StrategyName",
    "SweepBase",
    "SweepSpec",
    "SweepState",
    "SweepStatus",
    "SweepWorkload",
    "TrialOutcome",
    "TrialState",
    "TwinOptions",
    "best_trial",
]
