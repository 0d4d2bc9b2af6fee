"""A calibration sized to its budget from the server's own costs.

:func:`tui.domain.calibration.design` draws the loads at their full size: seconds on a GPU,
many minutes on a compute-bound CPU server. The probes (its first loads, small) give what a
load costs on this server (:class:`LoadCosts`: per prompt token, engine step and streamed
token, by :func:`scipy.optimize.nnls` over each finished load's wall time); :func:`plan`
sizes the rest from them, again after each load, so that every family and every pass
completes within the budget, and :meth:`Plan.eta` is the progress line's ETA from the same
estimates. :class:`tui.twin.calibrate.Calibration` runs it.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tui.domain.calibration import DesignedLoad
from tui.domain.workload import LoadSpec

LEAST_TOP = 16
"""The top concurrency a slow server's budget may lower it to (halving), never below."""
LEAST_LENGTH = 0.25
"""The least length factor: the long prompts stay three times the short probe's."""
PASS_SHARE = 0.85
"""The share of the budget the loads' own clocks are planned to (the rest: the server's
metrics read around each load, the prefix-cache reset, the warm-ups, an estimate's miss)."""


@dataclass(frozen=True)
class LoadCosts:
    """What a load costs on this server, from the loads finished so far: seconds per prompt
    token, per engine step and per output token (non-negative least squares over their
    wall times; the twin's step model needs the fit it is calibrating, this only sizes it)."""

    prompt_s: float
    step_s: float
    output_s: float

    @staticmethod
    def features(load: LoadSpec) -> tuple[float, float, float]:
        """Prompt tokens (a shared prefix once), decode steps (batches in turn x output
        length) and output tokens of a closed-loop load (its warm-ups included)."""
        n = load.num_prompts + load.num_warmups
        conc = min(load.max_concurrency or n, n)
        steps = (
            math.ceil(load.num_prompts / conc) * load.output_len
            + load.num_warmups * load.output_len
        )
        return (n * load.input_len + load.prefix_len, float(steps), float(n * load.output_len))

    @classmethod
    def fit(cls, runs: Sequence[tuple[LoadSpec, float]]) -> LoadCosts | None:
        """The costs of ``runs`` (a load as run, its seconds); ``None``: none yet."""
        if not runs:
            return None
        from scipy.optimize import nnls  # imported when used: scipy.optimize costs ~0.4 s

        x = np.array([cls.features(load) for load, _ in runs], dtype=float)
        y = np.array([secs for _, secs in runs], dtype=float)
        scale = np.maximum(x.max(axis=0), 1.0)  # columns of like size for the solver
        coef, _ = nnls(x / scale, y)
        coef = coef / scale
        return cls(float(coef[0]), float(coef[1]), float(coef[2]))

    def seconds(self, load: LoadSpec) -> float:
        """The seconds ``load`` is expected to take."""
        p, s, o = self.features(load)
        return self.prompt_s * p + self.step_s * s + self.output_s * o


@dataclass(frozen=True)
class Plan:
    """The design sized to the budget: every load as it will run (finished ones as they
    ran), and the costs it was sized from (``None`` before the first load finished)."""

    loads: list[DesignedLoad]
    costs: LoadCosts | None

    def eta(self, done: Collection[str], current_s: float = 0.0) -> float | None:
        """Seconds left: the loads not done, at the costs measured, less ``current_s`` the
        running one has taken (``None`` until the probes have finished)."""
        probing = (d for d in self.loads if d.probe and d.name == d.family)
        if self.costs is None or any(d.name not in done for d in probing):
            return None  # the probes' costs first: before them, a guess
        left = sum(self.costs.seconds(d.load) for d in self.loads if d.name not in done)
        return max(0.0, left - current_s)


def plan(
    loads: Sequence[DesignedLoad],
    ran: Mapping[str, tuple[LoadSpec, float]],
    budget_s: float,
) -> Plan:
    """``loads`` (:func:`tui.domain.calibration.design`'s) sized so that every pass
    completes within ``budget_s``.

    ``ran``: each finished load as it ran and its seconds. A finished load stays as it ran;
    a later pass repeats its family's first pass; the probes run as designed. The first
    pass's other families share :data:`PASS_SHARE` of the budget over the passes, less what
    the first pass has taken (the probes' expected time included): their requests shrink
    together (never below each one's ``least``), and where even that does not fit, the long
    prompts (down to :data:`LEAST_LENGTH` of their length, the families' ratios kept), then
    the top concurrency (halving, down to :data:`LEAST_TOP`). Where nothing fits, the
    smallest design runs and the budget cuts what is left.
    """
    costs = LoadCosts.fit(list(ran.values()))
    passes = max((int(d.name.split("#")[1]) if "#" in d.name else 1) for d in loads)
    first = [d for d in loads if "#" not in d.name]
    open_ = [d for d in first if d.name not in ran and not d.probe]
    sizes: dict[str, LoadSpec] = {d.name: d.load for d in first}
    for name, (load, _) in ran.items():
        sizes[name] = load.model_copy(update={"num_warmups": 0})
    if costs is not None and open_:
        taken = sum(
            ran[d.name][1] if d.name in ran else costs.seconds(d.load)
            for d in first
            if d not in open_
        )
        free = budget_s * PASS_SHARE / passes - taken
        sizes.update(_shrink(open_, costs, free))
    sized = []
    for d in loads:
        if d.name in ran:
            sized.append(d.as_run(sizes[d.name]))
        else:
            sized.append(d.as_run(sizes.get(d.family, d.load)))
    return Plan(sized, costs)


def _shrink(loads: list[DesignedLoad], costs: LoadCosts, free_s: float) -> dict[str, LoadSpec]:
    """``loads`` sized to take ``free_s`` seconds at ``costs`` (see :func:`plan`)."""
    top = max((d.load.max_concurrency or 1 for d in loads if d.top), default=None)

    def total(requests: float, length: float, conc: int | None) -> float:
        return sum(costs.seconds(d.sized(requests, length, conc)) for d in loads)

    def largest(fits: Callable[[float], bool], low: float) -> float:
        """The largest factor in [low, 1] that ``fits`` (``low`` when none does)."""
        if fits(1.0):
            return 1.0
        lo, hi = low, 1.0
        for _ in range(20):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo

    requests = largest(lambda r: total(r, 1.0, top) <= free_s, 0.0)
    length = 1.0
    if requests == 0.0:
        length = largest(lambda f: total(0.0, f, top) <= free_s, LEAST_LENGTH)
    while top is not None and top > LEAST_TOP and total(requests, length, top) > free_s:
        top = max(LEAST_TOP, top // 2)
    return {d.name: d.sized(requests, length, top) for d in loads}
